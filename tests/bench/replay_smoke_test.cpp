// --replay end to end: the exact algorithm replays with no wrong decision, on both backends
// and when the record is capped; fixed_window's boundary effect shows as wrongly admitted.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <memory>

#include "bench_process.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;

class bench_replay : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = std::make_unique<redis_server>(); }
  static void TearDownTestSuite() { redis_.reset(); }
  static std::unique_ptr<redis_server> redis_;

  // An open-loop run whose hottest keys are far over the limit: 1000 keys, Zipf 1.0, 4000/s
  // over a 200 ms window; the hottest key offers 4000 × 0.2 / H(1000) = 107 per window and a
  // quarter of the requests come from keys over the derived limit.
  static json::object run(const std::string& url, const std::string& algo,
                          std::vector<std::string> extra = {}, const std::string& threads = "2") {
    std::vector<std::string> args{"--redis",      url,    "--algorithm", algo,   "--rate",
                                  "4000",         "--arrivals", "poisson", "--keys", "1000",
                                  "--zipf",       "1.0",  "--window",    "200ms",
                                  "--over-limit-share", "0.25", "--duration", "1500ms",
                                  "--threads",    threads, "--inflight", "4",    "--replay",
                                  "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_bench(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    try {
      auto v = json::parse(r.out);
      if (v.is_object() && v.as_object().contains("wrong_decisions"))
        return v.as_object().at("wrong_decisions").as_object();
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
    ADD_FAILURE() << "no wrong_decisions in " << r.out;
    return {};
  }

  static std::int64_t n(const json::object& o, std::string_view field) {
    const auto* v = o.if_contains(field);
    if (!v || !v->is_number()) {
      ADD_FAILURE() << "no " << field << " in " << json::serialize(o);
      return -1;
    }
    return v->to_number<std::int64_t>();
  }
};

std::unique_ptr<redis_server> bench_replay::redis_;

TEST_F(bench_replay, sliding_log_on_the_memory_backend_decides_exactly_as_its_definition) {
  const auto w = run("memory://", "sliding_log");
  EXPECT_GT(n(w, "judged"), 4000);  // ~6000 requests
  EXPECT_EQ(n(w, "unjudged"), 0);
  EXPECT_EQ(n(w, "wrongly_admitted"), 0);
  // The memory backend decides each key under its lock at the ms it read: exact both ways.
  EXPECT_EQ(n(w, "wrongly_denied"), 0);
  EXPECT_EQ(w.at("over_admission").as_object().at("max").to_number<std::int64_t>(), 0);
}

// The bench stamps each request with its clock (the script's now) before sending it, so two
// senders, or two connections, can deliver a later stamp to Redis first; the script then
// trims the log at the later time, and the earlier request counts less than the definition
// at its own time does (a wrong admission the bench made, not the script: Redis's own TIME
// never runs backwards). One sender on one connection keeps stamps in the order Redis runs
// them (seen before with two: 1 wrongly admitted in ~6000).
TEST_F(bench_replay, sliding_log_on_redis_admits_nothing_its_definition_refuses) {
  const auto w = run(redis_->url() + "?connections=1", "sliding_log", {}, "1");
  EXPECT_GT(n(w, "judged"), 4000);
  EXPECT_EQ(n(w, "wrongly_admitted"), 0);
  EXPECT_EQ(w.at("over_admission").as_object().at("max").to_number<std::int64_t>(), 0);
}

TEST_F(bench_replay, fixed_windows_boundary_effect_is_wrongly_admitted) {
  // The hot keys fill each window early; at each boundary the fixed window admits a full limit
  // again while the previous window's admissions are still within W: over-admission.
  const auto w = run("memory://", "fixed_window");
  EXPECT_GT(n(w, "wrongly_admitted"), 0);
  EXPECT_GT(w.at("over_admission").as_object().at("max").to_number<std::int64_t>(), 0);
  EXPECT_EQ(n(w, "wrongly_denied"), 0) << "a fixed window never refuses what the log admits";
}

TEST_F(bench_replay, a_capped_record_is_judged_up_to_its_first_gap) {
  // 1000 of ~6000 decisions: 500 per thread; the rest is unjudged (never recorded, or
  // recorded after the first decision another thread left out), and what is judged is
  // complete (an incomplete history would show as wrong decisions of the exact algorithm).
  const auto w = run("memory://", "sliding_log", {"--replay-max", "1000"});
  EXPECT_LE(n(w, "judged"), 1000);
  EXPECT_GT(n(w, "judged"), 0);
  EXPECT_GT(n(w, "unjudged"), 4000);
  EXPECT_EQ(n(w, "recorded"), 1000);
  EXPECT_EQ(n(w, "wrongly_admitted"), 0);
  EXPECT_EQ(n(w, "wrongly_denied"), 0);
}

TEST_F(bench_replay, needs_the_library_target) {
  EXPECT_EQ(run_bench({"--redis", redis_->url(), "--naive", "--replay"}).exit_code, 2);
}

}  // namespace
}  // namespace floodgate::test
