// The backend-agnostic algorithm suite: every test here runs for each algorithm against each
// backend a test binary instantiates it with (memory in tests/unit, Redis in
// tests/integration). Include it in exactly one .cpp per binary, then:
//
//   INSTANTIATE_TEST_SUITE_P(memory, algorithm_suite,
//       ::testing::ValuesIn(floodgate::test::all_algorithms(&env)), param_name);
//   INSTANTIATE_TEST_SUITE_P(memory, boundary_suite, ::testing::Values(&env), env_name);
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "backend_env.hpp"
#include "floodgate/floodgate.hpp"
#include "test_clock.hpp"

namespace floodgate::test {

struct algorithm_param {
  backend_env* env;
  algorithm algo;
};

inline void PrintTo(const algorithm_param& p, std::ostream* os) {
  *os << p.env->name() << "/" << to_string(p.algo);
}

inline std::vector<algorithm_param> all_algorithms(backend_env* env) {
  std::vector<algorithm_param> out;
  for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                 algorithm::token_bucket, algorithm::gcra})
    out.push_back({env, a});
  return out;
}

inline std::string param_name(const ::testing::TestParamInfo<algorithm_param>& info) {
  return info.param.env->name() + "_" + std::string(to_string(info.param.algo));
}

inline std::string env_name(const ::testing::TestParamInfo<backend_env*>& info) {
  return info.param->name();
}

// A name no other test uses, so state never leaks between tests sharing one Redis.
inline std::string unique_name(const char* stem) {
  static std::atomic<int> counter{0};
  return std::string(stem) + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

class backend_test {
 protected:
  // The limiter counts local denials down on the backend's clock too.
  explicit backend_test(backend_env* env)
      : backend_(env->make(clock_.fn())), limiter_(backend_, options_on(clock_)) {}

  static limiter_options options_on(const test_clock& clock) {
    limiter_options o;
    o.clock = clock.fn();
    return o;
  }

  check_result check(const policy& p, std::int64_t cost = 1) { return limiter_.check(key_, p, cost); }
  check_result peek(const policy& p) { return check(p, 0); }

  test_clock clock_;
  std::shared_ptr<backend> backend_;
  limiter limiter_;
  std::string key_ = unique_name("key");
};

class algorithm_suite : public ::testing::TestWithParam<algorithm_param>, protected backend_test {
 protected:
  algorithm_suite() : backend_test(GetParam().env) {}

  // A policy of this test's algorithm with a name no other test uses. For token_bucket and
  // gcra, burst = limit so the capacity is `limit` for every algorithm.
  policy make(std::int64_t limit, std::chrono::milliseconds window) const {
    return policy(unique_name("p"), GetParam().algo, limit, window);
  }
};

using namespace std::chrono_literals;

TEST_P(algorithm_suite, admits_exactly_the_capacity_at_one_instant) {
  const auto p = make(5, 10s);
  for (int i = 1; i <= 5; ++i) {
    const auto r = check(p);
    ASSERT_EQ(r.outcome, outcome::allowed) << "request " << i << ": " << r.error.message();
    EXPECT_EQ(r.decision.limit, 5);
    EXPECT_EQ(r.decision.remaining, 5 - i);
    EXPECT_EQ(r.decision.retry_after, 0ms);
    EXPECT_GT(r.decision.reset_after, 0ms);
  }
  const auto r = check(p);
  EXPECT_EQ(r.outcome, outcome::over_limit);
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_EQ(r.decision.remaining, 0);
  EXPECT_GT(r.decision.retry_after, 0ms);
}

TEST_P(algorithm_suite, retry_after_is_exact) {
  for (std::int64_t cost : {1, 3}) {
    const auto p = make(6, 10s);
    while (check(p, 2).decision.allowed) {
    }
    const auto denied = check(p, cost);
    ASSERT_EQ(denied.outcome, outcome::over_limit);
    const auto wait = denied.decision.retry_after;
    ASSERT_GT(wait, 0ms);
    clock_.advance(wait - 1ms);
    EXPECT_EQ(check(p, cost).outcome, outcome::over_limit)
        << "cost " << cost << " admitted 1 ms before retry_after " << wait.count();
    clock_.advance(1ms);
    EXPECT_EQ(check(p, cost).outcome, outcome::allowed)
        << "cost " << cost << " denied at retry_after " << wait.count();
  }
}

TEST_P(algorithm_suite, denied_requests_consume_nothing) {
  const auto p = make(4, 10s);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(check(p).decision.allowed);
  const auto first = check(p);
  ASSERT_FALSE(first.decision.allowed);
  for (int i = 0; i < 50; ++i) {
    const auto again = check(p);
    EXPECT_EQ(again.decision, first.decision) << "a denial changed the state";
  }
  clock_.advance(first.decision.retry_after);
  EXPECT_TRUE(check(p).decision.allowed);
}

TEST_P(algorithm_suite, a_cost_that_does_not_fit_is_denied_whole) {
  const auto p = make(5, 10s);
  ASSERT_TRUE(check(p, 3).decision.allowed);
  const auto r = check(p, 3);
  EXPECT_EQ(r.outcome, outcome::over_limit);
  EXPECT_EQ(r.decision.remaining, 2);
  EXPECT_EQ(peek(p).decision.remaining, 2) << "a partial admission consumed something";
  EXPECT_TRUE(check(p, 2).decision.allowed);
}

TEST_P(algorithm_suite, cost_zero_peeks) {
  const auto p = make(3, 10s);
  auto r = peek(p);
  EXPECT_EQ(r.outcome, outcome::allowed);
  EXPECT_EQ(r.decision.remaining, 3);
  EXPECT_EQ(r.decision.reset_after, 0ms);
  ASSERT_TRUE(check(p).decision.allowed);
  EXPECT_EQ(peek(p).decision.remaining, 2);
  EXPECT_EQ(peek(p).decision.remaining, 2);
  ASSERT_TRUE(check(p, 2).decision.allowed);
  r = peek(p);
  EXPECT_EQ(r.outcome, outcome::allowed) << "a peek on an exhausted key is still allowed";
  EXPECT_EQ(r.decision.remaining, 0);
  EXPECT_EQ(r.decision.retry_after, 0ms);
}

// A reload that lowered the limit leaves keys above it: a peek still answers, allowed, with
// nothing remaining (docs/algorithms.md, "Cost").
TEST_P(algorithm_suite, a_peek_is_allowed_after_the_limit_was_lowered) {
  const std::string name = unique_name("p");
  const auto algo = GetParam().algo;
  // Lowered by the burst where there is one: gcra's rate is its state's unit.
  const policy high(name, algo, 5, 10s),
      low = takes_burst(algo) ? policy(name, algo, 5, 10s, 2) : policy(name, algo, 2, 10s);
  ASSERT_TRUE(check(high, 5).decision.allowed);
  const auto r = peek(low);
  EXPECT_EQ(r.outcome, outcome::allowed) << "a peek was denied";
  EXPECT_EQ(r.decision.remaining, 0);
  EXPECT_EQ(r.decision.retry_after, 0ms);
  EXPECT_FALSE(check(low).decision.allowed);
}

// State is never read in another policy's units (docs/algorithms.md, "Redis representation"):
// after a reload changed the window, a key that consumed 5 of 10 has 4 to 9 left after one
// more (9: the change started it afresh), never fewer (a token_bucket level kept in units of
// 1/window read as 0 before).
TEST_P(algorithm_suite, a_changed_window_never_misreads_the_state) {
  for (auto [from, to] : {std::pair{1000ms, 60000ms}, std::pair{60000ms, 1000ms}}) {
    const std::string name = unique_name("p");
    const policy before(name, GetParam().algo, 10, from), after(name, GetParam().algo, 10, to);
    ASSERT_TRUE(check(before, 5).decision.allowed);
    const auto r = check(after, 1);
    const std::string what = std::to_string(from.count()) + " ms -> " + std::to_string(to.count());
    ASSERT_EQ(r.outcome, outcome::allowed) << what;
    EXPECT_GE(r.decision.remaining, 4) << what;
    EXPECT_LE(r.decision.remaining, 9) << what;
  }
}

TEST_P(algorithm_suite, cost_above_capacity_is_an_invalid_request) {
  const auto p = make(3, 10s);
  const auto r = check(p, 4);
  EXPECT_EQ(r.outcome, outcome::invalid_request);
  EXPECT_EQ(r.error, errc::cost_exceeds_limit);
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_EQ(peek(p).decision.remaining, 3);
}

TEST_P(algorithm_suite, reset_after_is_when_full_capacity_is_back) {
  const auto p = make(4, 10s);
  clock_.advance(1234);  // off the window boundary
  ASSERT_TRUE(check(p, 3).decision.allowed);
  const auto reset = peek(p).decision.reset_after;
  ASSERT_GT(reset, 0ms);
  clock_.advance(reset - 1ms);
  EXPECT_LT(peek(p).decision.remaining, 4) << "full 1 ms before reset_after";
  clock_.advance(1ms);
  const auto r = peek(p);
  EXPECT_EQ(r.decision.remaining, 4) << "not full at reset_after";
  EXPECT_EQ(r.decision.reset_after, 0ms);
}

TEST_P(algorithm_suite, reset_forgets_the_key) {
  const auto p = make(2, 10s);
  ASSERT_TRUE(check(p, 2).decision.allowed);
  ASSERT_FALSE(check(p).decision.allowed);
  EXPECT_FALSE(limiter_.reset(key_, p));
  EXPECT_EQ(peek(p).decision.remaining, 2);
}

TEST_P(algorithm_suite, keys_and_policies_are_independent) {
  const auto p = make(1, 10s), q = make(1, 10s);
  ASSERT_TRUE(limiter_.check("a", p).decision.allowed);
  EXPECT_FALSE(limiter_.check("a", p).decision.allowed);
  EXPECT_TRUE(limiter_.check("b", p).decision.allowed);
  EXPECT_TRUE(limiter_.check("a", q).decision.allowed);
}

TEST_P(algorithm_suite, check_all_denial_changes_no_other_policy) {
  const auto wide = make(5, 10s), narrow = make(1, 10s);
  ASSERT_TRUE(check(narrow).decision.allowed);
  const auto before = peek(wide).decision;
  const auto r = limiter_.check_all({{key_, &wide, 1}, {key_, &narrow, 1}});
  EXPECT_EQ(r.outcome, outcome::over_limit);
  EXPECT_FALSE(r.allowed());
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_TRUE(r.decisions[0].allowed) << "the wide policy alone would have passed";
  EXPECT_FALSE(r.decisions[1].allowed);
  EXPECT_EQ(peek(wide).decision, before) << "a denied check_all consumed from another policy";

  clock_.advance(20s);
  const auto ok = limiter_.check_all({{key_, &wide, 2}, {key_, &narrow, 1}});
  EXPECT_EQ(ok.outcome, outcome::allowed);
  EXPECT_EQ(peek(wide).decision.remaining, 3);
  EXPECT_EQ(peek(narrow).decision.remaining, 0);
}

// Penalties (docs/algorithms.md, "Penalties"): 2 per 10 s, then 60 s out. Every algorithm's
// window admits again within 20 s of the refusal (sliding_window's previous window weighs
// until then), so what refuses at +30 s is the block alone.
TEST_P(algorithm_suite, block_for_refuses_until_it_ends) {
  const auto p = make(2, 10s).with_block_for(60s);
  ASSERT_TRUE(check(p, 2).decision.allowed);
  const auto refused = check(p);
  ASSERT_EQ(refused.outcome, outcome::over_limit);
  EXPECT_EQ(refused.decision.retry_after, 60s) << "the block, not the window's own wait";
  EXPECT_EQ(refused.decision.reset_after, 60s);
  EXPECT_EQ(refused.decision.remaining, 0);
  clock_.advance(30s);
  const auto still = check(p);
  EXPECT_EQ(still.outcome, outcome::over_limit) << "the window admits; the block must not";
  EXPECT_EQ(still.decision.retry_after, 30s) << "a refusal during a block does not extend it";
  const auto peeked = peek(p);
  EXPECT_TRUE(peeked.decision.allowed);
  EXPECT_EQ(peeked.decision.remaining, 0);
  clock_.advance(30s - 1ms);
  EXPECT_EQ(check(p).outcome, outcome::over_limit) << "admitted 1 ms before retry_after";
  clock_.advance(1ms);
  const auto again = check(p);
  EXPECT_EQ(again.outcome, outcome::allowed) << "refused at retry_after";
  EXPECT_EQ(again.decision.remaining, 1);
}

TEST_P(algorithm_suite, block_for_starts_only_for_the_policy_that_refused) {
  const auto wide = make(5, 10s).with_block_for(60s), narrow = make(1, 10s).with_block_for(60s);
  ASSERT_TRUE(check(narrow).decision.allowed);
  const auto r = limiter_.check_all({{key_, &wide, 1}, {key_, &narrow, 1}});
  EXPECT_EQ(r.outcome, outcome::over_limit);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_TRUE(r.decisions[0].allowed);
  EXPECT_EQ(r.decisions[1].retry_after, 60s);
  EXPECT_EQ(check(wide, 5).outcome, outcome::allowed) << "blocked for another policy's refusal";
  clock_.advance(20s);
  const auto blocked = limiter_.check_all({{key_, &narrow, 1}});
  EXPECT_EQ(blocked.outcome, outcome::over_limit);
  ASSERT_EQ(blocked.decisions.size(), 1u);
  EXPECT_EQ(blocked.decisions[0].retry_after, 40s);
}

TEST_P(algorithm_suite, reset_lifts_a_block) {
  const auto p = make(1, 10s).with_block_for(1h);
  ASSERT_TRUE(check(p).decision.allowed);
  ASSERT_EQ(check(p).decision.retry_after, 1h);
  EXPECT_FALSE(limiter_.reset(key_, p));
  EXPECT_TRUE(check(p).decision.allowed);
}

TEST_P(algorithm_suite, a_shortened_block_for_cuts_the_block_in_force) {
  const auto p = make(1, 1s).with_block_for(1h);
  ASSERT_TRUE(check(p).decision.allowed);
  ASSERT_EQ(check(p).decision.retry_after, 1h);
  clock_.advance(2s);  // the window admits again; past any local denial (1 s)
  const auto shorter = p.with_block_for(15s);  // a reload of the rule
  const auto r = check(shorter);
  EXPECT_EQ(r.outcome, outcome::over_limit);
  EXPECT_EQ(r.decision.retry_after, 15s) << "cut to the new block_for from now";
  clock_.advance(15s - 1ms);
  EXPECT_EQ(check(shorter).outcome, outcome::over_limit);
  clock_.advance(1ms);
  EXPECT_EQ(check(shorter).outcome, outcome::allowed) << "a block of the old 1 h";
  EXPECT_EQ(p.with_block_for(0ms).block_for(), 0ms);
}

// Refunds (docs/algorithms.md, "Refunds"): what was consumed comes back, never more than
// the capacity, and a block stays.
TEST_P(algorithm_suite, refund_gives_back_what_was_consumed_and_never_more) {
  const auto p = make(3, 10s);
  ASSERT_TRUE(check(p, 3).decision.allowed);
  ASSERT_FALSE(check(p).decision.allowed);
  auto r = limiter_.refund(key_, p, 1);
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_EQ(r.decision.remaining, 1);
  EXPECT_TRUE(check(p).decision.allowed) << "the local denial outlived the refund";
  EXPECT_FALSE(check(p).decision.allowed);
  EXPECT_EQ(limiter_.refund(key_, p, 3).decision.remaining, 3);
  EXPECT_EQ(limiter_.refund(key_, p, 3).decision.remaining, 3) << "a refund beyond the capacity";
  EXPECT_TRUE(check(p, 3).decision.allowed);
  EXPECT_FALSE(check(p).decision.allowed);
  EXPECT_EQ(limiter_.refund(key_, p, 0).outcome, outcome::invalid_request);
  EXPECT_EQ(limiter_.refund(key_, p, 4).outcome, outcome::invalid_request);
  EXPECT_EQ(limiter_.refund("", p, 1).outcome, outcome::invalid_request);
}

// Idempotency keys (issue 28, item 7): a refund retried under its key (after a timeout left
// its outcome unknown) gives back once; another key is another refund; the key is checked.
TEST_P(algorithm_suite, a_refund_retried_under_its_idempotency_key_gives_back_once) {
  const auto p = make(4, 10s);
  ASSERT_TRUE(check(p, 4).decision.allowed);
  auto r = limiter_.refund(key_, p, 1, "req-1");
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_EQ(r.decision.remaining, 1);
  r = limiter_.refund(key_, p, 1, "req-1");
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_EQ(r.decision.remaining, 1) << "refunded twice under one idempotency key";
  EXPECT_EQ(limiter_.refund(key_, p, 2, "req-2").decision.remaining, 3);
  EXPECT_EQ(limiter_.refund(key_, p, 2, "req-2").decision.remaining, 3);
  // The same idempotency key on another caller key, or another policy, is its own refund.
  const std::string other = key_ + "-other";
  ASSERT_TRUE(limiter_.check(other, p, 2).decision.allowed);
  EXPECT_EQ(limiter_.refund(other, p, 1, "req-1").decision.remaining, 3);
  for (const std::string& bad : {std::string(65, 'a'), std::string("has space"),
                                std::string("nl\n"), std::string("{tag}")}) {
    const auto b = limiter_.refund(key_, p, 1, bad);
    EXPECT_EQ(b.outcome, outcome::invalid_request) << bad;
    EXPECT_EQ(b.error, errc::invalid_idempotency_key) << bad;
  }
  EXPECT_TRUE(check(p, 3).decision.allowed);
  EXPECT_FALSE(check(p).decision.allowed) << "a bad idempotency key gave something back";
}

// A refund says what it gave back: nothing for a key that consumed nothing (it answered like
// any refund), what the state held when that is less than the cost, and a replay under its
// idempotency key repeats the first amount (docs/algorithms.md, "Refunds").
TEST_P(algorithm_suite, a_refund_says_what_it_gave_back) {
  const auto p = make(4, 10s);
  auto r = limiter_.refund(key_, p, 2);
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_EQ(r.refunded, 0) << "a key that consumed nothing";
  EXPECT_FALSE(r.replayed);
  ASSERT_TRUE(check(p, 3).decision.allowed);
  r = limiter_.refund(key_, p, 2);
  EXPECT_EQ(r.refunded, 2);
  EXPECT_EQ(r.decision.remaining, 3);
  r = limiter_.refund(key_, p, 4, "req-1");
  EXPECT_EQ(r.refunded, 1) << "1 was still consumed";
  EXPECT_FALSE(r.replayed);
  r = limiter_.refund(key_, p, 4, "req-1");
  EXPECT_EQ(r.refunded, 1) << "the first refund's amount";
  EXPECT_TRUE(r.replayed);
  EXPECT_EQ(r.decision.remaining, 4);
  EXPECT_EQ(limiter_.refund(key_, p, 1, "req-2").refunded, 0) << "all back already";
  const auto algo = GetParam().algo;
  if (algo == algorithm::token_bucket || algo == algorithm::gcra) {
    // Half a unit refilled of 3 consumed: 2.5 come back, counted as 3 (a part counts).
    ASSERT_TRUE(check(p, 3).decision.allowed);
    clock_.advance(1250ms);
    EXPECT_EQ(limiter_.refund(key_, p, 4).refunded, 3);
    EXPECT_EQ(limiter_.refund(key_, p, 1).refunded, 0);
  }
}

TEST_P(algorithm_suite, refund_keeps_a_block) {
  const auto p = make(1, 10s).with_block_for(1h);
  ASSERT_TRUE(check(p).decision.allowed);
  ASSERT_FALSE(check(p).decision.allowed);
  EXPECT_EQ(limiter_.refund(key_, p, 1).decision.remaining, 1) << "the window's state";
  clock_.advance(2s);
  EXPECT_EQ(check(p).decision.retry_after, 1h - 2s);
}

// Concurrency limits (docs/algorithms.md, "Concurrency limits"): at most `limit` leases live,
// a release frees exactly one slot, and only a live lease of that key can be released.
class lease_suite : public ::testing::TestWithParam<backend_env*>, protected backend_test {
 protected:
  lease_suite() : backend_test(GetParam()), sem_(*backend_) {}
  semaphore sem_;
};

TEST_P(lease_suite, at_most_the_limit_is_held_and_a_release_frees_exactly_one) {
  const concurrency_policy p{unique_name("c"), 3, 30s};
  std::vector<std::string> held;
  for (int i = 0; i < 3; ++i) {
    const auto a = sem_.acquire(key_, p);
    ASSERT_EQ(a.outcome, outcome::allowed) << a.error.message();
    EXPECT_EQ(a.decision.remaining, 2 - i);
    EXPECT_EQ(a.lease.size(), 32u);
    held.push_back(a.lease);
  }
  clock_.advance(10s);
  const auto refused = sem_.acquire(key_, p);
  EXPECT_EQ(refused.outcome, outcome::over_limit);
  EXPECT_TRUE(refused.lease.empty());
  EXPECT_EQ(refused.decision.retry_after, 20s) << "until the oldest lease ends";
  EXPECT_EQ(refused.decision.reset_after, 20s);

  EXPECT_TRUE(sem_.release(key_, p, held[1]).done);
  EXPECT_FALSE(sem_.release(key_, p, held[1]).done) << "a second release freed a slot";
  EXPECT_FALSE(sem_.release(key_, p, "0123456789abcdef0123456789abcdef").done);
  EXPECT_FALSE(sem_.release("another-key", p, held[0]).done) << "another key's lease";
  const auto again = sem_.acquire(key_, p);
  EXPECT_EQ(again.outcome, outcome::allowed) << "the released slot";
  EXPECT_EQ(again.decision.remaining, 0);
  EXPECT_EQ(sem_.acquire(key_, p).outcome, outcome::over_limit) << "one release, one slot";
}

TEST_P(lease_suite, an_expired_lease_frees_its_slot_and_renew_keeps_one_alive) {
  const concurrency_policy p{unique_name("c"), 2, 10s};
  const auto crashed = sem_.acquire(key_, p);
  const auto long_job = sem_.acquire(key_, p);
  ASSERT_EQ(long_job.outcome, outcome::allowed);
  clock_.advance(8s);
  EXPECT_TRUE(sem_.renew(key_, p, long_job.lease).done);  // until +18 s
  clock_.advance(2s - 1ms);
  EXPECT_EQ(sem_.acquire(key_, p).outcome, outcome::over_limit);
  clock_.advance(1ms);  // +10 s: the crashed holder's lease is over
  EXPECT_EQ(sem_.acquire(key_, p).outcome, outcome::allowed) << "a crashed holder's slot";
  EXPECT_FALSE(sem_.release(key_, p, crashed.lease).done) << "expired: nothing to free";
  EXPECT_FALSE(sem_.renew(key_, p, crashed.lease).done);
  clock_.advance(8s - 1ms);
  EXPECT_TRUE(sem_.release(key_, p, long_job.lease).done) << "renewed until +18 s";
}

TEST_P(lease_suite, bad_requests_are_invalid) {
  const concurrency_policy p{unique_name("c"), 1, 1s};
  EXPECT_EQ(sem_.acquire("", p).outcome, outcome::invalid_request);
  EXPECT_EQ(sem_.release(key_, p, "").error, make_error_code(errc::invalid_lease));
  EXPECT_EQ(sem_.release(key_, p, std::string(65, 'a')).error,
            make_error_code(errc::invalid_lease));
  EXPECT_THROW(concurrency_policy("c", 0, 1s), config_error);
  EXPECT_THROW(concurrency_policy("c", 1, 0ms), config_error);
  EXPECT_THROW(concurrency_policy("bad name", 1, 1s), config_error);
}

// Exact boundaries, one table per algorithm: each row is (time offset, cost) and the whole
// expected decision. The tables are derived by hand from docs/algorithms.md.
struct row {
  std::int64_t at;  // ms after the (window-aligned) start
  std::int64_t cost;
  bool allowed;
  std::int64_t remaining, reset_after, retry_after;
};

class boundary_suite : public ::testing::TestWithParam<backend_env*>, protected backend_test {
 protected:
  boundary_suite() : backend_test(GetParam()) {}

  void run(const policy& p, const std::vector<row>& rows) {
    const std::int64_t start = clock_.now();
    for (const auto& r : rows) {
      clock_.set(start + r.at);
      const auto got = check(p, r.cost).decision;
      const std::string where = std::string(to_string(p.algo())) + " at +" +
                                std::to_string(r.at) + " cost " + std::to_string(r.cost);
      EXPECT_EQ(got.allowed, r.allowed) << where;
      EXPECT_EQ(got.limit, p.capacity()) << where;
      EXPECT_EQ(got.remaining, r.remaining) << where;
      EXPECT_EQ(got.reset_after.count(), r.reset_after) << where;
      EXPECT_EQ(got.retry_after.count(), r.retry_after) << where;
    }
  }
};

TEST_P(boundary_suite, sliding_log) {
  run(policy(unique_name("p"), algorithm::sliding_log, 3, 1s),
      {{0, 1, true, 2, 1000, 0},
       {100, 1, true, 1, 1000, 0},
       {200, 1, true, 0, 1000, 0},
       {300, 1, false, 0, 900, 700},  // the entry at 0 ages out at 1000
       {999, 1, false, 0, 201, 1},
       {1000, 1, true, 0, 1000, 0},  // t=0 is no longer live: live means t > now - window
       {1000, 0, true, 0, 1000, 0},
       {1100, 2, false, 1, 900, 100},  // needs the entry at 200 gone
       {1200, 2, true, 0, 1000, 0}});
}

TEST_P(boundary_suite, fixed_window) {
  run(policy(unique_name("p"), algorithm::fixed_window, 2, 1s),
      {{0, 1, true, 1, 1000, 0},
       {500, 1, true, 0, 500, 0},
       {999, 1, false, 0, 1, 1},
       {1000, 1, true, 1, 1000, 0},  // a new window
       {1000, 2, false, 1, 1000, 1000},
       {1999, 0, true, 1, 1, 0},
       {2000, 0, true, 2, 0, 0},
       {2000, 2, true, 0, 1000, 0}});
}

TEST_P(boundary_suite, sliding_window) {
  run(policy(unique_name("p"), algorithm::sliding_window, 10, 1s),
      {{0, 10, true, 0, 2000, 0},
       {0, 1, false, 0, 2000, 1100},   // next window, at e where ceil(10 (W-e)/W) <= 9
       {1099, 1, false, 0, 901, 1},    // ceil(10 * 901 / 1000) = 10
       {1100, 1, true, 0, 1900, 0},    // ceil(10 * 900 / 1000) = 9
       {1500, 1, true, 3, 1500, 0},    // 1 + ceil(10 * 500 / 1000) = 6 used before
       {1500, 4, false, 3, 1500, 100},  // 2 + 5 + 4 > 10 until 2 + 4 + 4 fits
       {1600, 4, true, 0, 1400, 0},
       {3500, 0, true, 10, 0, 0}});
}

// token_bucket and gcra are one algorithm in two representations: same table.
inline std::vector<row> bucket_rows() {
  // 10 per second refills one token every 100 ms; burst 5.
  return {{0, 5, true, 0, 500, 0},
          {0, 1, false, 0, 500, 100},
          {99, 1, false, 0, 401, 1},
          {100, 1, true, 0, 500, 0},
          {350, 2, true, 0, 450, 0},
          {350, 1, false, 0, 450, 50},
          {10000, 0, true, 5, 0, 0}};
}

TEST_P(boundary_suite, token_bucket) {
  run(policy(unique_name("p"), algorithm::token_bucket, 10, 1s, 5), bucket_rows());
}

TEST_P(boundary_suite, gcra) {
  run(policy(unique_name("p"), algorithm::gcra, 10, 1s, 5), bucket_rows());
}

TEST_P(boundary_suite, gcra_with_a_fractional_emission_interval) {
  // 7 per minute: one every 8571.43 ms, kept exactly as whole ms + remainder / 7.
  run(policy(unique_name("p"), algorithm::gcra, 7, 60s, 1),
      {{0, 1, true, 0, 8572, 0},
       {8571, 1, false, 0, 1, 1},   // TAT = 8571.43
       {8572, 1, true, 0, 8572, 0},  // TAT = 8572 + 8571.43 = 17143.43
       {17143, 1, false, 0, 1, 1},
       {17144, 1, true, 0, 8572, 0},
       {60000, 1, true, 0, 8572, 0}});
}

// A reload that scales L and W together keeps the rate and the state's meaning (the key names
// the reduced rate, docs/algorithms.md "State and policy changes"): the state must read as it
// was written. 7 per minute then 14 per 2 minutes, burst 2: after two checks at 0 the TAT is
// 17142.857 ms, so at 8571 one more is 0.43 ms early. A TAT kept in 1/L ms (1/7 ms, read as
// 1/14 ms after the reload) misread it as 17142.43 and admitted it.
TEST_P(boundary_suite, gcra_reads_its_state_after_l_and_w_scale_together) {
  const std::string name = unique_name("p");
  const policy before(name, algorithm::gcra, 7, 60s, 2), after(name, algorithm::gcra, 14, 120s, 2);
  const std::int64_t start = clock_.now();
  EXPECT_TRUE(check(before).decision.allowed);
  EXPECT_TRUE(check(before).decision.allowed);
  clock_.set(start + 8571);
  const auto early = check(after).decision;
  EXPECT_FALSE(early.allowed);
  EXPECT_EQ(early.retry_after.count(), 1);
  EXPECT_EQ(early.reset_after.count(), 8572);
  clock_.set(start + 8572);
  const auto due = check(after).decision;
  EXPECT_TRUE(due.allowed);
  EXPECT_EQ(due.remaining, 0);
  EXPECT_EQ(due.reset_after.count(), 17143);
}

}  // namespace floodgate::test
