// NOSCRIPT (scripts flushed, or a restarted Redis): calls are retried after SCRIPT LOAD,
// invisibly, and never counted twice.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "integration_support.hpp"
#include "info_text.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

TEST(noscript, script_flush_in_a_loop_is_invisible_and_never_double_counts) {
  redis_server redis;
  const auto prefix = unique_prefix("flush");
  backend_options o = redis_options_for(prefix, fixed_clock());
  o.redis.timeout = 2s;  // this test is about NOSCRIPT, not deadlines
  limiter l{redis.url(), o};
  constexpr std::int64_t limit = 300;
  const policy log{"log", algorithm::sliding_log, limit, 1h};
  const policy user{"user", algorithm::fixed_window, 1'000'000, 1h};

  std::atomic<bool> stop{false};
  std::atomic<int> flushes{0};
  std::thread flusher([&] {
    while (!stop.load()) {
      redis.command({"SCRIPT", "FLUSH"});
      flushes.fetch_add(1);
    }
  });

  constexpr int threads = 8, per_thread = 150;
  std::atomic<int> admitted{0}, denied{0}, errors{0}, multi_admitted{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        if (i % 3 == 0) {
          // The multi script too: the same key under another policy, all-or-nothing.
          const auto key = "m" + std::to_string(t);
          const auto r = l.check_all({{key, &user, 1}, {"shared", &log, 1}});
          if (r.outcome == outcome::allowed)
            ++admitted, ++multi_admitted;
          else if (r.outcome == outcome::over_limit)
            ++denied;
          else
            ++errors;
        } else {
          const auto r = l.check("shared", log);
          if (r.outcome == outcome::allowed)
            ++admitted;
          else if (r.outcome == outcome::over_limit)
            ++denied;
          else
            ++errors;
        }
      }
    });
  for (auto& w : workers) w.join();
  stop.store(true);
  flusher.join();

  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(admitted.load(), limit) << "exactly the limit, though scripts kept vanishing";
  EXPECT_EQ(admitted.load() + denied.load(), threads * per_thread);
  EXPECT_GT(flushes.load(), 10);
  // The log holds exactly what was admitted: nothing ran twice.
  const auto key = prefix + "log:sl:{shared}";
  EXPECT_EQ(sliding_log_units(redis, key), limit);
  // NOSCRIPT really happened (failed EVALSHAs, and SCRIPT LOADs beyond the handshake's).
  const auto noscripts = command_stat(redis, "evalsha", "failed_calls");
  const auto loads = command_stat(redis, "script|load", "calls");
  std::cout << "flushes " << flushes << ", failed EVALSHA " << noscripts << ", SCRIPT LOAD "
            << loads << ", EVAL fallbacks " << command_stat(redis, "eval", "calls") << "\n";
  EXPECT_GT(noscripts, 0);
  EXPECT_GT(loads, 2 * 6);
  // Each reload after NOSCRIPT is counted for /metrics; handshake loads are not.
  const auto reloads = l.get_backend().stats().script_reloads;
  EXPECT_GT(reloads, 0u);
  EXPECT_LE(reloads, static_cast<std::uint64_t>(loads - 2 * 6));
}

TEST(noscript, a_restarted_redis_is_used_again_after_reconnecting) {
  redis_server redis;
  backend_options o = redis_options_for(unique_prefix("restart"), fixed_clock());
  limiter l{redis.url(), o};
  const policy p{"p", algorithm::gcra, 1000, 1s};
  ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);

  redis.restart();  // same port; no scripts, no data, every connection gone
  const auto start = std::chrono::steady_clock::now();
  int attempts = 0;
  check_result r;
  do {
    ++attempts;
    r = l.check("k", p);
    if (r.outcome != outcome::allowed) std::this_thread::sleep_for(5ms);
  } while (r.outcome != outcome::allowed && std::chrono::steady_clock::now() - start < 5s);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  std::cout << "back after " << attempts << " attempts, "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_LT(took, 2s) << "backoff starts at 10 ms and the server is up when restart() returns";
  EXPECT_TRUE(l.get_backend().healthy());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(l.check("k", p).outcome, outcome::allowed) << i;

  // And flushed scripts after the restart: still invisible.
  redis.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(l.check("k", p).outcome, outcome::allowed);
}

}  // namespace
}  // namespace floodgate::test
