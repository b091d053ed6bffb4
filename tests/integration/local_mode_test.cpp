// Local mode (failure_mode::local) against a real Redis behind a fault relay: during an outage
// each instance decides at limit ÷ N, so N instances together stay within the limit; an outage
// costs one deadline, not one per call; decisions go back to Redis when it answers again.
#include <gtest/gtest.h>

#include <thread>

#include "fault_relay.hpp"
#include "integration_support.hpp"
#include "pacer.hpp"
#include "real_clock_window.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using fault = fault_relay::fault;

constexpr auto deadline = 100ms;

backend_options options_for(const std::string& prefix) {
  backend_options o = redis_options_for(prefix, {}, deadline);
  o.redis.connect_timeout = 300ms;
  return o;
}

// Checks decided locally answer in a microsecond: loops that wait for an outage to end ask
// at this rate, well above the probe interval's.
constexpr double checks_per_second = 200;

TEST(local_mode, an_outage_costs_one_deadline_then_decides_at_limit_over_n_and_recovers) {
  redis_server redis;
  fault_relay relay{redis.port()};
  limiter_options lo;
  lo.instances = 2;
  lo.local_mode_probe_interval = 100ms;
  limiter l{relay.url(), options_for(unique_prefix("local")), lo};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"p", algorithm::fixed_window, 10, 1h, std::nullopt, failure_mode::local,
                 local_denials::off};
  // Redis's count and the local one each in one window (real clock): the test's waits are
  // 22 deadlines at most, 600 ms and the 5 s recovery.
  constexpr auto recovery_limit = 5s;
  inside_one_window(p.window(), 22 * deadline + 600ms + recovery_limit);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);
  EXPECT_FALSE(l.stats().local_mode_active);

  relay.set_fault(fault::black_hole);
  auto start = clock::now();
  auto r = l.check("k", p);
  const auto first = clock::now() - start;
  EXPECT_TRUE(r.local_mode);
  EXPECT_TRUE(r.degraded());
  EXPECT_EQ(r.error, errc::timeout) << r.error.message();
  EXPECT_EQ(r.outcome, outcome::allowed);
  EXPECT_EQ(r.decision.limit, 5) << "10 ÷ 2 instances";
  EXPECT_GE(first, 100ms) << "the first call waits for its deadline";
  int admitted = 1;
  start = clock::now();
  for (int i = 0; i < 20; ++i) {
    r = l.check("k", p);
    EXPECT_TRUE(r.local_mode);
    if (r.outcome == outcome::allowed) ++admitted;
  }
  // Within the probe interval every call is local at once; after it one probe at a time waits.
  EXPECT_EQ(admitted, 5) << "limit ÷ N per window in this instance";
  EXPECT_EQ(r.outcome, outcome::over_limit);
  EXPECT_GT(r.decision.retry_after, 0ms);
  EXPECT_TRUE(l.stats().local_mode_active);
  EXPECT_EQ(l.stats().local_mode_decisions, 21u);

  // Past connect_timeout the silent connections are replaced, so the calls held in the black
  // hole are never delivered (TCP would deliver them late, and they would count in Redis).
  std::this_thread::sleep_for(600ms);
  relay.set_fault(fault::none);
  // Back to Redis once a probe gets through.
  start = clock::now();
  pacer pace{checks_per_second};  // local answers come at once: not millions of them
  do {
    pace();
    r = l.check("k", p);
  } while (r.local_mode && clock::now() - start < recovery_limit);
  ASSERT_FALSE(r.local_mode) << "still local after 5 s";
  EXPECT_EQ(r.outcome, outcome::allowed);
  // Redis's count: the 3 before, this one, and any probe that reached Redis but answered after
  // its deadline (it ran; the caller was answered locally). The 5 local admissions are not in it.
  EXPECT_LE(r.decision.remaining, 10 - 3 - 1);
  EXPECT_GE(r.decision.remaining, 10 - 3 - 1 - 2) << "local admissions counted in Redis";
  EXPECT_FALSE(l.stats().local_mode_active);
}

// Three instances (limiters with their own heartbeats) on one Redis: each learns N = 3 from the
// heartbeats; Redis black-holed mid-window, they admit 10 each, 30 together: the limit. With
// what Redis admitted before the outage, the window's total is at most limit + that.
TEST(local_mode, instances_count_each_other_and_together_stay_within_the_limit) {
  redis_server redis;
  fault_relay relay{redis.port()};
  const auto prefix = unique_prefix("instances");
  limiter_options lo;
  lo.local_mode_probe_interval = 10s;  // no probe during the test: the outage is the test
  std::vector<std::unique_ptr<limiter>> instances;
  for (int i = 0; i < 3; ++i)
    instances.push_back(std::make_unique<limiter>(relay.url(), options_for(prefix), lo));
  const policy p{"p", algorithm::fixed_window, 30, 1h, std::nullopt, failure_mode::local};
  // The local shares counted in one window (real clock): the heartbeats' 5 s, then 3 × 25
  // checks of which each instance's first waits a deadline.
  constexpr auto heartbeats_limit = 5s;
  inside_one_window(p.window(), heartbeats_limit + 3 * deadline + 1s);
  for (auto& l : instances) ASSERT_EQ(l->check("k", p).outcome, outcome::allowed);
  for (auto until = clock::now() + heartbeats_limit; clock::now() < until;) {
    bool all = true;
    for (auto& l : instances) all = all && l->stats().instances == 3;
    if (all) break;
    std::this_thread::sleep_for(20ms);
  }
  for (auto& l : instances) ASSERT_EQ(l->stats().instances, 3) << "heartbeats counted";

  relay.set_fault(fault::black_hole);
  std::vector<int> admitted(instances.size(), 0);
  std::vector<std::thread> callers;
  for (std::size_t i = 0; i < instances.size(); ++i)
    callers.emplace_back([&, i] {
      for (int n = 0; n < 25; ++n) {
        const auto r = instances[i]->check("k", p);
        EXPECT_TRUE(r.local_mode);
        if (r.decision.allowed) ++admitted[i];
      }
    });
  for (auto& c : callers) c.join();
  int total = 0;
  for (auto& l : instances) EXPECT_EQ(l->stats().instances, 3);
  for (int a : admitted) {
    EXPECT_EQ(a, 10) << "30 ÷ 3";
    total += a;
  }
  EXPECT_EQ(total, 30) << "the instances together: the limit, no more";
}

// Issue 28, item 11a: every other local-mode test uses a limit N divides exactly (or one so
// small that the burst's rounding refuses it anyway), so a share rounded up instead of down went
// unnoticed. The share is limit ÷ N rounded down (N instances must stay within the limit
// together: 3 × 4 = 12 > 10), for the limit and the burst alike.
TEST(local_mode, an_uneven_limit_is_shared_rounded_down) {
  redis_server redis;
  fault_relay relay{redis.port()};
  limiter_options lo;
  lo.instances = 3;
  lo.local_mode_probe_interval = 10s;  // no probe during the test: the outage is the test
  limiter l{relay.url(), options_for(unique_prefix("uneven")), lo};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  // The window algorithm scales its limit; the bucket scales its burst (its capacity), and its
  // rate 11 ÷ 3 too, which the test does not wait long enough to see refill.
  const policy window{"window", algorithm::fixed_window, 10, 1h, std::nullopt,
                      failure_mode::local, local_denials::off};
  const policy bucket{"bucket", algorithm::token_bucket, 11, 1h, 11, failure_mode::local,
                      local_denials::off};
  // The window's 3 local admissions in one window (real clock): 12 checks, the first waits a
  // deadline.
  inside_one_window(window.window(), 12 * deadline + 1s);
  relay.set_fault(fault::black_hole);
  for (const policy* p : {&window, &bucket}) {
    int admitted = 0;
    check_result r;
    for (int i = 0; i < 6; ++i) {
      r = l.check("k", *p);
      ASSERT_TRUE(r.local_mode) << p->name() << " #" << i << ": " << r.error.message();
      if (r.outcome == outcome::allowed) ++admitted;
    }
    EXPECT_EQ(admitted, 3) << p->name() << ": " << p->capacity() << " ÷ 3 rounds down to 3";
    EXPECT_EQ(r.decision.limit, 3) << p->name();
    EXPECT_EQ(r.outcome, outcome::over_limit) << p->name();
  }
}

TEST(local_mode, a_limit_below_n_refuses_locally_and_a_mixed_group_fails_closed) {
  redis_server redis;
  fault_relay relay{redis.port()};
  limiter_options lo;
  lo.instances = 4;
  limiter l{relay.url(), options_for(unique_prefix("small")), lo};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy three{"three", algorithm::gcra, 3, 1h, std::nullopt, failure_mode::local};
  const policy open{"open", algorithm::gcra, 100, 1h, std::nullopt, failure_mode::open};
  relay.set_fault(fault::black_hole);
  const auto r = l.check("k", three);
  EXPECT_TRUE(r.local_mode);
  EXPECT_EQ(r.outcome, outcome::over_limit) << "3 ÷ 4 rounds down to 0: nothing admitted";
  EXPECT_EQ(r.decision.retry_after, 1h);
  // A group of a local-mode and an open policy: not local (all-or-nothing across a shared and
  // a local decision means nothing); each policy's failure decision, the local one closed.
  const auto m = l.check_all({{"k", &three, 1}, {"k", &open, 1}});
  EXPECT_FALSE(m.local_mode);
  EXPECT_EQ(m.outcome, outcome::backend_error);
  EXPECT_FALSE(m.allowed());
}

// Issue 28, item 5, replayed: fixed_window 10 per hour, one instance, 10 admitted with Redis
// up, then four short outages (CLIENT PAUSE, each well past the deadline). Each recovery used
// to drop the local state, so each outage handed out the local share again: 50 in a window of
// 10. The local admissions now carry across outages within their window: the local share is
// handed out once per window however many outages, so the window's total stays within the
// documented bound, limit (Redis) + limit ÷ N (this instance's local share).
TEST(local_mode, repeated_outages_hand_out_the_local_share_once_per_window) {
  redis_server redis;
  limiter_options lo;
  lo.instances = 1;
  lo.local_mode_probe_interval = 50ms;
  limiter l{redis.url(), options_for(unique_prefix("local_repeat")), lo};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"p", algorithm::fixed_window, 10, 1h, std::nullopt, failure_mode::local,
                 local_denials::off};
  constexpr auto pause = 700ms;
  constexpr int outages = 4;
  constexpr auto recovery_limit = 5s;
  // Every outage in the window of the first 10 (real clock), or the local share is rightly
  // handed out again in the next one: 20 counted in a run at 20:00 UTC. The test's waits:
  // each outage's pause and recovery, and a second for the 11 checks before.
  inside_one_window(p.window(), outages * (pause + recovery_limit) + 1s);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);
  ASSERT_EQ(l.check("k", p).outcome, outcome::over_limit);

  int local_admitted = 0, outages_seen = 0;
  for (int outage = 0; outage < outages; ++outage) {
    ASSERT_EQ(redis.command({"CLIENT", "PAUSE", std::to_string(pause.count()), "WRITE"}).str, "OK");
    bool seen = false;
    check_result r;
    // Until a check is decided by Redis again: the pause, then a probe's answer (paced).
    const auto until = clock::now() + pause + recovery_limit;
    pacer pace{checks_per_second};
    do {
      pace();
      r = l.check("k", p);
      seen = seen || r.local_mode;
      if (r.local_mode && r.outcome == outcome::allowed) ++local_admitted;
    } while ((!seen || r.local_mode) && clock::now() < until);
    ASSERT_FALSE(r.local_mode) << "still local 5 s after the pause";
    outages_seen += seen;
  }
  EXPECT_EQ(outages_seen, outages);
  EXPECT_EQ(local_admitted, 10) << "the local share (10 ÷ 1) once in the window, not per outage";
}

// A probe answered from the deny cache is no backend answer: it must not end the outage (the
// next checks would each wait a deadline on a Redis that still does not answer).
TEST(local_mode, a_deny_cache_hit_on_the_probe_does_not_end_the_outage) {
  redis_server redis;
  limiter_options lo;
  lo.instances = 1;
  lo.local_mode_probe_interval = 300ms;
  limiter l{redis.url(), options_for(unique_prefix("local_probe")), lo};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"p", algorithm::fixed_window, 1, 1h, std::nullopt, failure_mode::local};
  constexpr auto pause = 3000ms;
  // "denied" stays denied only within its window (real clock): the test lasts at most the pause.
  inside_one_window(p.window(), pause + 1s);
  ASSERT_EQ(l.check("denied", p).outcome, outcome::allowed);
  ASSERT_EQ(l.check("denied", p).outcome, outcome::over_limit);  // remembered for 1 s
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", std::to_string(pause.count()), "WRITE"}).str, "OK");
  const auto r = l.check("other", p);  // times out: the outage starts
  ASSERT_TRUE(r.local_mode) << r.error.message();
  ASSERT_TRUE(l.stats().local_mode_active);
  std::this_thread::sleep_for(lo.local_mode_probe_interval + 50ms);  // the next check probes
  l.check("denied", p);  // the probe: Redis, still paused, times out (answered locally)
  EXPECT_TRUE(l.stats().local_mode_active) << "a deny-cache answer ended the outage";
  // Still in the outage: decided locally (before: sent to the paused Redis).
  EXPECT_TRUE(l.check("other", p).local_mode);
}

}  // namespace
}  // namespace floodgate::test
