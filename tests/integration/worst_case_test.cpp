// A script's worst case is bounded (docs/algorithms.md, "sliding_log"): the largest request a
// valid policy admits costs Redis one sorted-set member, not one per cost unit. Asserted on
// what Redis stores (members, MEMORY USAGE), never on wall time.
#include <gtest/gtest.h>

#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

class worst_case_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new redis_server(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  static redis_server* redis_;
};
redis_server* worst_case_test::redis_ = nullptr;

// Before: one member per cost unit (100,000 members, ~5 MB; at limit 2,000,000 Redis was busy
// 5 s and the key 237 MB).
TEST_F(worst_case_test, a_sliding_log_request_of_any_cost_is_one_member) {
  // 10^12 x 1 s is the largest limit a policy allows (limit x window <= 10^15).
  for (std::int64_t limit : {std::int64_t{100'000}, std::int64_t{1'000'000'000'000}}) {
    // Redis's own measure of a command's time on its thread: none of ours may take 50 ms (a
    // loaded CI machine may preempt Redis for a few ms; the old script took 362 ms here).
    const std::string prefix = unique_prefix("worst");
    limiter l{redis_->url(), redis_options_for(prefix, fixed_clock())};
    ASSERT_TRUE(wait_healthy(l.get_backend()));  // the handshake's SCRIPT LOADs are not ours
    redis_->command({"CONFIG", "SET", "slowlog-log-slower-than", "50000"});
    redis_->command({"SLOWLOG", "RESET"});
    const policy p{"big", algorithm::sliding_log, limit, 1000ms};
    const auto r = l.check("k", p, limit);
    ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
    EXPECT_EQ(r.decision.remaining, 0);
    EXPECT_FALSE(l.check("k", p, 1).decision.allowed);
    const std::string key = prefix + "big:sl:{k}";
    EXPECT_EQ(redis_->command({"ZCARD", key}).integer, 1) << "limit " << limit;
    EXPECT_LT(redis_->command({"MEMORY", "USAGE", key, "SAMPLES", "0"}).integer, 256)
        << "limit " << limit;
    EXPECT_EQ(redis_->command({"SLOWLOG", "LEN"}).integer, 0) << "limit " << limit;
  }
}

}  // namespace
}  // namespace floodgate::test
