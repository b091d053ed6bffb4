// NOSCRIPT and missing functions (scripts or functions flushed, or a restarted Redis): calls
// are retried after SCRIPT LOAD or FUNCTION LOAD, invisibly, and never counted twice.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "integration_support.hpp"
#include "info_text.hpp"
#include "redis/scripts.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

struct flush_counts {
  int flushes = 0;
  std::uint64_t reloads = 0;
};

// Checks (single and all-or-nothing) from 8 threads while another sends `flushes` in a loop:
// exactly the limit is admitted, nothing fails, and the log holds what was admitted.
flush_counts checks_while_flushing(redis_server& redis, bool use_functions,
                                   const std::vector<std::vector<std::string>>& flushes) {
  const auto prefix = unique_prefix("flush");
  backend_options o = redis_options_for(prefix, fixed_clock());
  o.redis.timeout = 2s;  // this test is about NOSCRIPT, not deadlines
  o.redis.use_functions = use_functions;
  limiter l{redis.url(), o};
  constexpr std::int64_t limit = 300;
  const policy log{"log", algorithm::sliding_log, limit, 1h};
  const policy user{"user", algorithm::fixed_window, 1'000'000, 1h};

  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread flusher([&] {
    while (!stop.load()) {
      for (const auto& f : flushes) redis.command(f);
      rounds.fetch_add(1);
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
  EXPECT_GT(rounds.load(), 10);
  // The log holds exactly what was admitted: nothing ran twice.
  const auto key = prefix + "log:sl:{shared}";
  EXPECT_EQ(sliding_log_units(redis, key), limit);
  return {rounds.load(), l.get_backend().stats().script_reloads};
}

TEST(noscript, script_flush_in_a_loop_is_invisible_and_never_double_counts) {
  redis_server redis;
  const auto counts = checks_while_flushing(redis, false, {{"SCRIPT", "FLUSH"}});
  // NOSCRIPT really happened (failed EVALSHAs, and SCRIPT LOADs beyond the handshake's: 11 on
  // each of 2 connections).
  const auto noscripts = command_stat(redis, "evalsha", "failed_calls");
  const auto loads = command_stat(redis, "script|load", "calls");
  std::cout << "flushes " << counts.flushes << ", failed EVALSHA " << noscripts
            << ", SCRIPT LOAD " << loads << ", EVAL fallbacks "
            << command_stat(redis, "eval", "calls") << "\n";
  EXPECT_GT(noscripts, 0);
  EXPECT_GT(loads, 2 * 11);
  // Each reload after NOSCRIPT is counted for /metrics; handshake loads are not.
  EXPECT_GT(counts.reloads, 0u);
  EXPECT_LE(counts.reloads, static_cast<std::uint64_t>(loads - 2 * 11));
  EXPECT_EQ(command_stat(redis, "fcall", "calls"), 0) << "functions turned off";
}

// Functions flushed too: a missing function sends the call again as EVALSHA (which may meet
// NOSCRIPT, then EVAL) while the library is loaded again.
TEST(noscript, function_and_script_flushes_in_a_loop_are_invisible_and_never_double_count) {
  redis_server redis;
  const auto counts =
      checks_while_flushing(redis, true, {{"FUNCTION", "FLUSH"}, {"SCRIPT", "FLUSH"}});
  const auto missing = command_stat(redis, "fcall", "failed_calls");
  const auto library_loads = command_stat(redis, "function|load", "calls");
  std::cout << "flushes " << counts.flushes << ", FCALL " << command_stat(redis, "fcall", "calls")
            << " (" << missing << " failed), FUNCTION LOAD " << library_loads << ", EVALSHA "
            << command_stat(redis, "evalsha", "calls") << ", EVAL "
            << command_stat(redis, "eval", "calls") << "\n";
  EXPECT_GT(command_stat(redis, "fcall", "calls"), missing) << "FCALL was used between flushes";
  EXPECT_GT(missing, 0);
  EXPECT_GT(library_loads, 2) << "loaded again after flushes, beyond each greeting's";
  EXPECT_GT(counts.reloads, 0u);
}

// By default the scripts run as functions: one library, loaded by the first connection's
// greeting (the others find it there), called by FCALL for single checks, batches and
// all-or-nothing checks alike, with no script loaded; with ?functions=no, EVALSHA after the
// greeting's SCRIPT LOADs.
TEST(noscript, scripts_run_as_functions_of_one_library_unless_turned_off) {
  redis_server redis;
  const auto& lib = redis::script_library();
  const policy p{"p", algorithm::gcra, 1000, 1s};
  const auto burst = [&](limiter& l) {
    completion_counter counter(60);
    for (int i = 0; i < 60; ++i)
      l.async_check("k" + std::to_string(i % 7), p, 1, [&](check_result r) {
        EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();
        counter.done();
      });
    EXPECT_TRUE(counter.wait(10s));
    const policy q{"q", algorithm::fixed_window, 1000, 1s};
    EXPECT_EQ(l.check_all({{"k", &p, 1}, {"k", &q, 1}}).outcome, outcome::allowed);
  };
  {
    limiter l{redis.url() + "?connections=3", redis_options_for(unique_prefix("fn"))};
    ASSERT_TRUE(wait_healthy(l.get_backend()));
    burst(l);
  }
  const auto libraries = redis.command({"FUNCTION", "LIST"});
  ASSERT_EQ(libraries.elements.size(), 1u) << "one library, however many connections";
  const auto& fields = libraries.elements[0].elements;
  ASSERT_GE(fields.size(), 2u);
  EXPECT_EQ(fields[1].str, lib.name);
  EXPECT_EQ(command_stat(redis, "function|load", "calls"), 3) << "one per connection";
  EXPECT_EQ(command_stat(redis, "function|load", "failed_calls"), 2) << "two found it loaded";
  EXPECT_GT(command_stat(redis, "fcall", "calls"), 0);
  EXPECT_EQ(command_stat(redis, "fcall", "failed_calls"), 0);
  EXPECT_EQ(command_stat(redis, "evalsha", "calls"), 0);
  EXPECT_EQ(command_stat(redis, "script|load", "calls"), 0) << "FCALL needs no script loaded";

  redis.command({"CONFIG", "RESETSTAT"});
  {
    limiter l{redis.url() + "?functions=no", redis_options_for(unique_prefix("sha"))};
    ASSERT_TRUE(wait_healthy(l.get_backend()));
    burst(l);
  }
  EXPECT_EQ(command_stat(redis, "function|load", "calls"), 0);
  EXPECT_EQ(command_stat(redis, "fcall", "calls"), 0);
  EXPECT_GT(command_stat(redis, "evalsha", "calls"), 0);
  // Every script, by the greeting of each connection that connected (2 by default).
  const auto loads = command_stat(redis, "script|load", "calls");
  EXPECT_GT(loads, 0);
  EXPECT_EQ(loads % 11, 0) << loads;
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
