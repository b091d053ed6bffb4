// Same-millisecond bursts: several processes, each with many threads, fire at one key at the
// same instant. Every exact algorithm must admit exactly its limit: Redis runs each script
// atomically, and two requests in one millisecond are two requests.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "forked_burst.hpp"
#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

constexpr int processes = 4;
constexpr int threads_per_process = 64;
constexpr int calls_per_thread = 2;
constexpr std::int64_t limit = 100;  // of 512 calls

struct counts {
  int admitted = 0;
  int errors = 0;
};

// One child: connects, starts its threads, waits to be released, fires, reports.
void child(burst_child& me, const std::string& url, const std::string& prefix, algorithm a,
           const std::string& key) {
  backend_options o = redis_options_for(prefix, fixed_clock());  // one millisecond for all
  o.redis.timeout = 5s;  // a burst of 256 on two cores: this is about counting, not latency
  limiter l{url, o};
  const policy p{"burst", a, limit, 1h};
  if (!wait_healthy(l.get_backend())) ::_exit(4);
  std::atomic<bool> go{false};
  std::atomic<int> admitted{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_per_process; ++t)
    threads.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < calls_per_thread; ++i) {
        const auto r = l.check(key, p);
        if (r.outcome == outcome::allowed)
          admitted.fetch_add(1);
        else if (r.outcome != outcome::over_limit)
          errors.fetch_add(1);
      }
    });
  me.ready_and_wait();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  me.report(counts{admitted.load(), errors.load()});
}

class burst_test : public ::testing::TestWithParam<algorithm> {};

TEST_P(burst_test, admits_exactly_the_limit) {
  redis_server redis;
  const algorithm a = GetParam();
  const auto prefix = unique_prefix("burst");
  for (int round = 0; round < 3; ++round) {
    const auto key = "hot" + std::to_string(round);
    const auto results = forked_burst<counts>(
        processes, [&](burst_child& me) { child(me, redis.url(), prefix, a, key); });
    ASSERT_TRUE(results) << "a child failed";
    counts r;
    for (const auto& c : *results) {
      r.admitted += c.admitted;
      r.errors += c.errors;
    }
    EXPECT_EQ(r.errors, 0) << to_string(a) << " round " << round;
    EXPECT_EQ(r.admitted, limit) << to_string(a) << " round " << round << ": "
                                 << processes * threads_per_process * calls_per_thread << " calls";
  }
  if (a == algorithm::sliding_log) {
    EXPECT_EQ(sliding_log_units(redis, prefix + "burst:sl:{hot0}"), limit)
        << "the log holds exactly what was admitted";
  }
}

INSTANTIATE_TEST_SUITE_P(exact, burst_test,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         [](const ::testing::TestParamInfo<algorithm>& param) {
                           return std::string(to_string(param.param));
                         });

}  // namespace
}  // namespace floodgate::test
