// Faults between floodgate and a real Redis, through a real TCP path (tests/support/
// fault_relay.hpp) and from Redis itself. For each: every call answers within its deadline
// (plus scheduling slack), in its policy's failure mode when Redis cannot decide; nothing is
// admitted beyond the limit; and the client recovers by itself when the fault ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "fault_relay.hpp"
#include "integration_support.hpp"
#include "pacer.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using fault = fault_relay::fault;

// A timer fires late, a thread wakes late on a loaded 2-core machine (208 ms against a 100 ms
// deadline was seen at load 10, 330 ms at load 12). The deadline plus this stays below
// connect_timeout (500 ms) without sanitizers: a call held to the connection's end instead of
// its own deadline is still caught.
constexpr auto slack = 290ms * timing_factor;

// What a stream of checks saw while a fault lasted.
struct observed {
  int calls = 0;
  int admitted = 0;  // by Redis (not degraded)
  int denied = 0;    // by Redis
  std::map<std::string, int> errors;  // backend errors by message
  clock::duration slowest{};
  int wrong_mode = 0;  // a backend error answered against the policy's failure mode

  int errors_of(errc e) const {
    const auto it = errors.find(make_error_code(e).message());
    return it == errors.end() ? 0 : it->second;
  }
  int errors_total() const {
    int n = 0;
    for (const auto& [what, count] : errors) n += count;
    return n;
  }
  std::string summary() const {
    std::string s = std::to_string(calls) + " calls, " + std::to_string(admitted) +
                    " admitted, " + std::to_string(denied) + " denied";
    for (const auto& [what, count] : errors) s += ", " + std::to_string(count) + "× " + what;
    return s;
  }
};

// `threads` callers check `key` against `p` (alternating with `q` when given) until `for_how_long`
// passes.
observed checks_during(limiter& l, const std::string& key, const policy& p,
                       clock::duration for_how_long, int threads = 4) {
  observed seen;
  std::mutex m;
  const auto until = clock::now() + for_how_long;
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t)
    callers.emplace_back([&] {
      // A ceiling, not a rate: calls Redis answers (or a deadline ends) come slower. Denials
      // remembered in-process and a breaker's refusals come at once, millions a second.
      pacer pace{1000};
      while (clock::now() < until) {
        pace();
        const auto start = clock::now();
        const auto r = l.check(key, p);
        const auto took = clock::now() - start;
        std::lock_guard lock(m);
        ++seen.calls;
        seen.slowest = std::max(seen.slowest, took);
        if (r.outcome == outcome::allowed)
          ++seen.admitted;
        else if (r.outcome == outcome::over_limit)
          ++seen.denied;
        else {
          ++seen.errors[r.error.message()];
          const bool open = p.on_failure() == failure_mode::open;
          // Open admits and marks it degraded; closed denies.
          if (r.decision.allowed != open || r.degraded() != open) ++seen.wrong_mode;
        }
      }
    });
  for (auto& c : callers) c.join();
  std::cout << seen.summary() << "; slowest "
            << std::chrono::duration_cast<std::chrono::milliseconds>(seen.slowest).count()
            << " ms\n";
  return seen;
}

// Checks until one is decided by Redis again; how long that took.
clock::duration recovery(limiter& l, const std::string& key, const policy& p) {
  const auto start = clock::now();
  while (clock::now() - start < 10s) {
    if (l.check(key, p).outcome != outcome::backend_error) break;
    std::this_thread::sleep_for(5ms);
  }
  const auto took = clock::now() - start;
  std::cout << "recovered in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  return took;
}

long long ms(clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

class fault_test : public ::testing::Test {
 protected:
  void SetUp() override {
    o_ = redis_options_for(unique_prefix("fault"), fixed_clock(), 100ms);
    o_.redis.connect_timeout = 500ms;
    limiter_ = std::make_unique<limiter>(relay_.url(), o_);
    ASSERT_TRUE(wait_healthy(limiter_->get_backend()));
  }

  redis_server redis_;
  fault_relay relay_{redis_.port()};
  backend_options o_;
  std::unique_ptr<limiter> limiter_;
  // Closed: a backend error denies. The limit is out of reach unless a test says so.
  const policy closed_{"closed", algorithm::fixed_window, 1'000'000, 1h, std::nullopt,
                       failure_mode::closed};
  const policy open_{"open", algorithm::gcra, 1'000'000, 1h, std::nullopt, failure_mode::open};
};

TEST_F(fault_test, replies_sliced_into_single_bytes_decide_exactly) {
  relay_.set_fault(fault::slice);
  // Every denial from Redis too (no local denials), so every reply crosses the slicer.
  const policy fifty{"fifty", algorithm::sliding_log, 50, 1h, std::nullopt, failure_mode::closed,
                     local_denials::off};
  const auto seen = checks_during(*limiter_, "k", fifty, 400ms);
  EXPECT_EQ(seen.errors_total(), 0) << seen.summary();
  EXPECT_EQ(seen.admitted, 50) << seen.summary();
  EXPECT_EQ(seen.denied, seen.calls - 50);
}

TEST_F(fault_test, latency_under_the_deadline_costs_nothing_but_time) {
  relay_.set_latency(30ms);
  const auto seen = checks_during(*limiter_, "k", closed_, 400ms);
  EXPECT_EQ(seen.errors_total(), 0) << seen.summary();
  EXPECT_GT(seen.admitted, 0);
  EXPECT_EQ(relay_.accepted(), static_cast<int>(o_.redis.connections));
}

// Replies come, but after the deadline: each call times out alone; the connection is kept
// (it answers within connect_timeout), and once latency falls calls are decided again.
// (The breaker, which fails calls at once after breaker_failures timeouts in a row, is put out
// of reach: this is about the connection. tests/cluster/health_test.cpp has the breaker.)
TEST_F(fault_test, a_latency_spike_past_the_deadline_times_out_each_call_and_keeps_the_connection) {
  o_.redis.breaker_failures = 1'000'000;
  limiter_ = std::make_unique<limiter>(relay_.url(), o_);
  ASSERT_TRUE(wait_healthy(limiter_->get_backend()));
  relay_.set_latency(250ms);
  const auto seen = checks_during(*limiter_, "k", open_, 600ms);
  relay_.set_latency(0ms);
  EXPECT_EQ(seen.wrong_mode, 0) << seen.summary();
  EXPECT_LE(seen.slowest, o_.redis.timeout + slack) << seen.summary();
  EXPECT_GT(seen.errors_of(errc::timeout), 0) << seen.summary();
  EXPECT_EQ(seen.errors_of(errc::not_connected), 0)
      << "a late reply failed other calls: " << seen.summary();
  const auto back = recovery(*limiter_, "k", open_);
  EXPECT_LE(back, 300ms + slack) << "owed replies arrive 250 ms late, then calls are decided";
  // No reconnect: the fixture's limiter's connections and this one's, once each.
  EXPECT_EQ(relay_.accepted(), 2 * static_cast<int>(o_.redis.connections));
}

// Nothing comes back at all: calls answer at their deadline in the failure mode; the silent
// connections are replaced after connect_timeout; when the route heals, decisions resume.
TEST_F(fault_test, a_black_hole_answers_by_the_failure_mode_and_recovers) {
  relay_.set_fault(fault::black_hole);
  const auto seen = checks_during(*limiter_, "k", closed_, 1200ms);
  EXPECT_EQ(seen.wrong_mode, 0) << seen.summary();
  EXPECT_EQ(seen.admitted + seen.denied, 0) << seen.summary();
  EXPECT_LE(seen.slowest, o_.redis.timeout + slack) << seen.summary();
  EXPECT_GT(relay_.accepted(), static_cast<int>(o_.redis.connections))
      << "silent connections replaced after connect_timeout";
  relay_.set_fault(fault::none);
  const auto back = recovery(*limiter_, "k", closed_);
  // A reconnect in progress must finish (connect_timeout) and the backoff may wait too.
  EXPECT_LE(back, 3s) << ms(back) << " ms";
}

TEST_F(fault_test, a_stalled_half_open_connection_answers_by_the_failure_mode_and_recovers) {
  relay_.set_fault(fault::stall);
  const auto seen = checks_during(*limiter_, "k", open_, 1200ms);
  EXPECT_EQ(seen.wrong_mode, 0) << seen.summary();
  EXPECT_LE(seen.slowest, o_.redis.timeout + slack) << seen.summary();
  EXPECT_GT(seen.errors_total(), 0);
  relay_.set_fault(fault::none);
  const auto back = recovery(*limiter_, "k", open_);
  EXPECT_LE(back, 3s) << ms(back) << " ms";
}

// Resets mid-reply: the call whose reply was cut fails (it may have counted in Redis), as do
// the others in flight; no call waits past its deadline, the limit holds, and the client
// reconnects by itself.
TEST_F(fault_test, connections_reset_mid_reply_never_admit_past_the_limit) {
  const policy twenty{"twenty", algorithm::fixed_window, 20, 1h};
  relay_.set_fault(fault::reset_mid_reply);
  const auto during = checks_during(*limiter_, "k", twenty, 500ms);
  EXPECT_EQ(during.wrong_mode, 0) << during.summary();
  EXPECT_LE(during.slowest, o_.redis.timeout + slack) << during.summary();
  EXPECT_GT(relay_.accepted(), static_cast<int>(o_.redis.connections));
  relay_.set_fault(fault::none);
  const auto back = recovery(*limiter_, "k", twenty);
  EXPECT_LE(back, 3s) << ms(back) << " ms";
  const auto after = checks_during(*limiter_, "k", twenty, 300ms);
  EXPECT_EQ(after.errors_total(), 0) << after.summary();
  // Calls cut mid-reply may have counted: the admitted are at most the limit, never more.
  EXPECT_LE(during.admitted + after.admitted, 20) << during.summary() << " / " << after.summary();
  EXPECT_GT(after.denied, 0);
}

// Redis's own faults, on a direct connection.

TEST(redis_fault, out_of_memory_answers_by_the_failure_mode_then_recovers) {
  redis_server redis;
  backend_options o = redis_options_for(unique_prefix("oom"), fixed_clock(), 200ms);
  limiter l{redis.url(), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy closed{"closed", algorithm::gcra, 1'000'000, 1h, std::nullopt, failure_mode::closed};
  ASSERT_EQ(l.check("before", closed).outcome, outcome::allowed);
  redis.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  redis.command({"CONFIG", "SET", "maxmemory", "1"});
  const auto r = l.check("new-key", closed);
  EXPECT_EQ(r.outcome, outcome::backend_error);
  EXPECT_EQ(r.error, errc::out_of_memory) << r.error.message();
  EXPECT_FALSE(r.decision.allowed) << "closed denies";
  redis.command({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(l.check("new-key", closed).outcome, outcome::allowed);
}

TEST(redis_fault, a_busy_script_answers_busy_by_the_failure_mode_then_recovers) {
  redis_server redis({.extra_args = {"--busy-reply-threshold", "50"}});
  backend_options o = redis_options_for(unique_prefix("busy"), fixed_clock(), 200ms);
  limiter l{redis.url(), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy open{"open", algorithm::gcra, 1'000'000, 1h, std::nullopt, failure_mode::open};
  ASSERT_EQ(l.check("k", open).outcome, outcome::allowed);
  // Someone else's script loops (read-only, so SCRIPT KILL can stop it).
  std::thread looper([&] {
    try {
      redis.command({"EVAL", "local i = 0 while true do i = i + 1 end", "0"});
    } catch (const std::exception&) {
      // Its connection's 1 s read timeout, or the kill's error reply: either way it ended.
    }
  });
  std::this_thread::sleep_for(150ms);  // past busy-reply-threshold: Redis answers BUSY
  const auto start = clock::now();
  const auto r = l.check("k", open);
  const auto took = clock::now() - start;
  redis.command({"SCRIPT", "KILL"});
  looper.join();
  EXPECT_EQ(r.outcome, outcome::backend_error);
  EXPECT_EQ(r.error, errc::server_busy) << r.error.message();
  EXPECT_TRUE(r.decision.allowed && r.degraded()) << "open admits, marked degraded";
  EXPECT_LE(took, o.redis.timeout + slack);
  const auto back = recovery(l, "k", open);
  EXPECT_LE(back, 1s) << ms(back) << " ms";
}

}  // namespace
}  // namespace floodgate::test
