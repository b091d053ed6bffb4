// Reservations (policy::reserve) on a real Redis: processes reserving and spending one hot
// key's quota at once admit exactly its limit, with a fraction of the script calls a check
// each would take.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "forked_burst.hpp"
#include "info_text.hpp"
#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

constexpr int processes = 4;
constexpr int threads_per_process = 4;
constexpr std::int64_t limit = 3000;

struct counts {
  int admitted = 0;
  int from_reservations = 0;
  int errors = 0;
};

// One child: its threads check the key until each has been denied 30 times in a row. A
// process is denied only when it holds no reserved unit, so at the end none is stranded and
// every unit the key had was spent somewhere.
void child(burst_child& me, const std::string& url, const std::string& prefix, algorithm a) {
  backend_options o = redis_options_for(prefix, fixed_clock());  // one window for the run
  o.redis.timeout = 5s;  // this is about counting, not latency
  limiter l{url, o};
  const auto p = policy{"hot", a, limit, 1h}.with_reserve(200, 1s);
  if (!wait_healthy(l.get_backend())) ::_exit(4);
  std::atomic<int> admitted{0}, reserved{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_per_process; ++t)
    threads.emplace_back([&] {
      int denied_in_a_row = 0;
      while (denied_in_a_row < 30) {
        const auto r = l.check("k", p);
        if (r.outcome == outcome::allowed) {
          admitted.fetch_add(1);
          if (r.reserved) reserved.fetch_add(1);
          denied_in_a_row = 0;
        } else {
          if (r.outcome != outcome::over_limit) errors.fetch_add(1);
          ++denied_in_a_row;
          std::this_thread::sleep_for(1ms);  // paced: the others still spend theirs
        }
      }
    });
  me.ready_and_wait();
  for (auto& t : threads) t.join();
  me.report(counts{admitted.load(), reserved.load(), errors.load()});
}

class processes_spending_one_key : public ::testing::TestWithParam<algorithm> {};

TEST_P(processes_spending_one_key, admit_exactly_its_limit) {
  redis_server redis;
  const auto prefix = unique_prefix("reserve");
  const long long calls_before = script_calls(redis);
  const auto results = forked_burst<counts>(
      processes, [&](burst_child& me) { child(me, redis.url(), prefix, GetParam()); });
  ASSERT_TRUE(results) << "a child failed";
  counts sum;
  for (const auto& c : *results) {
    sum.admitted += c.admitted;
    sum.from_reservations += c.from_reservations;
    sum.errors += c.errors;
  }
  const long long calls = script_calls(redis) - calls_before;
  EXPECT_EQ(sum.errors, 0);
  EXPECT_EQ(sum.admitted, limit);
  // Most admissions spent reserved units; the script calls are the reservations, the checks
  // of the last units and the denials at the end (30 a thread).
  EXPECT_GT(sum.from_reservations, limit * 3 / 4);
  EXPECT_LT(calls, limit / 3) << sum.from_reservations << " admitted from reservations";
}

INSTANTIATE_TEST_SUITE_P(reservations, processes_spending_one_key,
                         ::testing::Values(algorithm::fixed_window, algorithm::sliding_window),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

}  // namespace
}  // namespace floodgate::test
