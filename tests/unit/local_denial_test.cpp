// Local denials (docs/algorithms.md, "Local denials"): a limiter that denies repeated requests
// in-process must decide exactly as one that asks the backend every time.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "deny_cache.hpp"
#include "floodgate/floodgate.hpp"
#include "memory/memory_backend.hpp"
#include "test_clock.hpp"

namespace floodgate {
namespace {

using namespace std::chrono_literals;
using test::test_clock;

// A real memory backend behind a counter of the calls that reach it. Its kind is not
// "memory", so a limiter keeps local denials for it as it would for Redis.
class counting_backend final : public backend {
 public:
  explicit counting_backend(std::shared_ptr<backend> inner) : inner_(std::move(inner)) {}
  void async_check(std::span<const check_item> items, backend_handler h) override {
    calls.fetch_add(1);
    inner_->async_check(items, std::move(h));
  }
  void async_reset(std::string_view key, const policy& p, reset_handler h) override {
    inner_->async_reset(key, p, std::move(h));
  }
  bool healthy() const noexcept override { return inner_->healthy(); }
  std::string_view kind() const noexcept override { return "counting"; }
  std::atomic<int> calls{0};

 private:
  std::shared_ptr<backend> inner_;
};

std::shared_ptr<backend> memory_on(const test_clock& clock) {
  memory_options o;
  o.clock = clock.fn();
  return std::make_shared<memory::memory_backend>(o);
}

limiter_options on_clock(const test_clock& clock) {
  limiter_options o;
  o.clock = clock.fn();
  return o;
}

constexpr algorithm all_algorithms[] = {algorithm::sliding_log, algorithm::sliding_window,
                                        algorithm::fixed_window, algorithm::token_bucket,
                                        algorithm::gcra};

// The same random requests, at the same times of one shared clock, to a limiter with local
// denials and to one without (the oracle): identical verdicts and retry_after on every step.
TEST(local_denials, decide_exactly_as_the_backend_for_every_algorithm) {
  for (algorithm a : all_algorithms) {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      std::mt19937_64 rng(seed);
      const policy p{"prop", a, 6, 1000ms,
                     takes_burst(a) ? std::optional<std::int64_t>(4) : std::nullopt};
      test_clock clock;
      limiter oracle{memory_on(clock)};
      auto counted = std::make_shared<counting_backend>(memory_on(clock));
      limiter_options o = on_clock(clock);
      o.max_local_denial = std::chrono::milliseconds{seed % 2 ? 1000 : 150};  // caps some
      limiter subject{counted, o};
      std::int64_t last_cost = 1, last_retry = 0;
      for (int step = 0; step < 300; ++step) {
        switch (rng() % 6) {  // land on retry_after exactly, 1 ms before, or anywhere
          case 0: clock.advance(last_retry); break;
          case 1: clock.advance(std::max<std::int64_t>(last_retry - 1, 0)); break;
          case 2: clock.advance(static_cast<std::int64_t>(rng() % 400)); break;
          default: clock.advance(static_cast<std::int64_t>(rng() % 20)); break;
        }
        // Mostly the same cost again (what a client retrying does), sometimes another one.
        const std::int64_t cost =
            rng() % 3 ? last_cost : static_cast<std::int64_t>(rng() % (p.capacity() + 1));
        const std::string where = std::string(to_string(a)) + " seed " + std::to_string(seed) +
                                  " step " + std::to_string(step) + " cost " +
                                  std::to_string(cost);
        if (rng() % 40 == 0) {
          ASSERT_FALSE(oracle.reset("k", p)) << where;
          ASSERT_FALSE(subject.reset("k", p)) << where;
          continue;
        }
        if (rng() % 10 == 0) {  // several items are never denied locally, but they consume
          const auto want = oracle.check_all({{"k", &p, cost}, {"k2", &p, 0}});
          const auto got = subject.check_all({{"k", &p, cost}, {"k2", &p, 0}});
          ASSERT_EQ(got.outcome, want.outcome) << where;
          ASSERT_EQ(got.decisions, want.decisions) << where;
          EXPECT_FALSE(got.local);
          continue;
        }
        check_result want, got;
        if (rng() % 10 == 0) {  // one item: a check, through check_all's interface
          const auto w = oracle.check_all({{"k", &p, cost}});
          const auto g = subject.check_all({{"k", &p, cost}});
          ASSERT_EQ(w.decisions.size(), 1u);
          ASSERT_EQ(g.decisions.size(), 1u);
          want = {w.outcome, w.decisions[0], w.error, w.local};
          got = {g.outcome, g.decisions[0], g.error, g.local};
        } else {
          want = oracle.check("k", p, cost);
          got = subject.check("k", p, cost);
        }
        ASSERT_EQ(got.outcome, want.outcome) << where << (got.local ? " (local)" : "");
        ASSERT_EQ(got.decision.allowed, want.decision.allowed) << where;
        ASSERT_EQ(got.decision.retry_after, want.decision.retry_after) << where;
        ASSERT_EQ(got.decision.limit, want.decision.limit) << where;
        if (got.local) {
          EXPECT_LT(got.decision.remaining, cost) << where;
          EXPECT_LE(got.decision.reset_after, want.decision.reset_after) << where;
        } else {
          ASSERT_EQ(got.decision, want.decision) << where;
        }
        last_cost = cost > 0 ? cost : 1;
        last_retry = got.decision.retry_after.count();
      }
      EXPECT_GT(subject.stats().local_denials, 0u) << to_string(a) << " seed " << seed;
    }
  }
}

class local_denial_test : public ::testing::Test {
 protected:
  local_denial_test() { make({}); }

  void make(limiter_options o) {
    o.clock = clock_.fn();
    backend_ = std::make_shared<counting_backend>(memory_on(clock_));
    limiter_ = std::make_unique<limiter>(backend_, std::move(o));
  }
  check_result check(const policy& p, std::int64_t cost = 1) {
    return limiter_->check("k", p, cost);
  }
  int calls() const { return backend_->calls.load(); }

  test_clock clock_;
  std::shared_ptr<counting_backend> backend_;
  std::unique_ptr<limiter> limiter_;
};

const policy bucket{"bucket", algorithm::token_bucket, 1, 1000ms, 5};  // 1 token/s, burst 5

TEST_F(local_denial_test, expires_exactly_at_retry_after) {
  ASSERT_TRUE(check(bucket, 5).decision.allowed);
  const auto denied = check(bucket, 1);
  ASSERT_FALSE(denied.decision.allowed);
  EXPECT_FALSE(denied.local) << "the first denial comes from the backend";
  ASSERT_EQ(denied.decision.retry_after, 1000ms);
  EXPECT_EQ(calls(), 2);

  clock_.advance(999);
  const auto local = check(bucket, 1);
  EXPECT_EQ(local.outcome, outcome::over_limit);
  EXPECT_TRUE(local.local);
  EXPECT_EQ(local.decision.retry_after, 1ms) << "counted down";
  EXPECT_EQ(local.decision.limit, 5);
  EXPECT_EQ(calls(), 2) << "1 ms before retry_after: no backend call";

  clock_.advance(1);
  const auto again = check(bucket, 1);
  EXPECT_TRUE(again.decision.allowed);
  EXPECT_FALSE(again.local);
  EXPECT_EQ(calls(), 3) << "at retry_after the backend decides";
  EXPECT_EQ(limiter_->stats().local_denials, 1u);
}

TEST_F(local_denial_test, only_the_denied_cost_is_denied_locally) {
  ASSERT_TRUE(check(bucket, 4).decision.allowed);  // 1 token left
  const auto three = check(bucket, 3);
  ASSERT_FALSE(three.decision.allowed);
  EXPECT_EQ(three.decision.retry_after, 2000ms);
  EXPECT_TRUE(check(bucket, 3).local);
  EXPECT_EQ(calls(), 2);

  EXPECT_FALSE(check(bucket, 4).local) << "a larger cost's exact retry_after is unknown here";
  EXPECT_EQ(calls(), 3);
  EXPECT_TRUE(check(bucket, 4).local) << "its own denial is now remembered";

  const auto one = check(bucket, 1);
  EXPECT_TRUE(one.decision.allowed) << "a smaller cost that fits goes to the backend";
  EXPECT_EQ(calls(), 4);
  const auto after = check(bucket, 3);
  EXPECT_FALSE(after.local) << "an admission of that state forgets what was remembered";
  EXPECT_EQ(after.decision.retry_after, 3000ms);
  EXPECT_EQ(calls(), 5);
}

TEST_F(local_denial_test, a_one_item_check_all_is_denied_locally_several_are_not) {
  const policy other{"other", algorithm::gcra, 5, 1s};
  ASSERT_TRUE(check(bucket, 5).decision.allowed);
  ASSERT_FALSE(check(bucket, 2).decision.allowed);
  const auto one = limiter_->check_all({{"k", &bucket, 2}});
  EXPECT_EQ(one.outcome, outcome::over_limit);
  EXPECT_TRUE(one.local);
  ASSERT_EQ(one.decisions.size(), 1u);
  EXPECT_EQ(one.decisions[0].retry_after, 2000ms);
  EXPECT_EQ(calls(), 2);
  const auto two = limiter_->check_all({{"k", &bucket, 2}, {"k", &other, 1}});
  EXPECT_EQ(two.outcome, outcome::over_limit);
  EXPECT_FALSE(two.local);
  ASSERT_EQ(two.decisions.size(), 2u);
  EXPECT_TRUE(two.decisions[1].allowed) << "each item's own decision, from the backend";
  EXPECT_EQ(calls(), 3);
}

TEST_F(local_denial_test, a_reset_in_this_process_drops_the_local_denial) {
  ASSERT_TRUE(check(bucket, 5).decision.allowed);
  ASSERT_FALSE(check(bucket, 5).decision.allowed);
  ASSERT_TRUE(check(bucket, 5).local);
  ASSERT_FALSE(limiter_->reset("k", bucket));
  const auto r = check(bucket, 5);
  EXPECT_TRUE(r.decision.allowed);
  EXPECT_FALSE(r.local);
  EXPECT_EQ(limiter_->stats().local_denial_entries, 0u);
}

TEST_F(local_denial_test, a_reset_elsewhere_is_seen_within_max_local_denial) {
  limiter_options o;
  o.max_local_denial = 200ms;
  make(o);
  const policy day{"day", algorithm::fixed_window, 1, 24h};
  ASSERT_TRUE(check(day).decision.allowed);
  const auto denied = check(day);
  ASSERT_FALSE(denied.decision.allowed);
  limiter elsewhere{backend_};  // another process on the same store
  ASSERT_FALSE(elsewhere.reset("k", day));

  clock_.advance(199);
  const auto stale = check(day);
  EXPECT_TRUE(stale.local) << "the documented bound: denied for up to max_local_denial";
  EXPECT_EQ(stale.decision.retry_after, denied.decision.retry_after - 199ms)
      << "still the countdown of the backend's denial";
  clock_.advance(1);
  EXPECT_TRUE(check(day).decision.allowed) << "past the cap the backend decides";
}

TEST_F(local_denial_test, the_cap_ends_a_long_denial_and_the_backend_renews_it) {
  limiter_options o;
  o.max_local_denial = 100ms;
  make(o);
  const policy minute{"minute", algorithm::fixed_window, 1, 60s};
  ASSERT_TRUE(check(minute).decision.allowed);
  ASSERT_FALSE(check(minute).decision.allowed);
  clock_.advance(99);
  EXPECT_TRUE(check(minute).local);
  EXPECT_EQ(calls(), 2);
  clock_.advance(1);
  const auto renewed = check(minute);
  EXPECT_FALSE(renewed.local);
  EXPECT_EQ(renewed.decision.retry_after, 60s - 100ms);
  EXPECT_EQ(calls(), 3);
  EXPECT_TRUE(check(minute).local);
}

TEST_F(local_denial_test, an_opted_out_policy_always_asks_the_backend) {
  const policy off{"off", algorithm::gcra, 1, 1s, 1, failure_mode::closed, local_denials::off};
  ASSERT_TRUE(check(off).decision.allowed);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(check(off).local);
  EXPECT_EQ(calls(), 11);
  EXPECT_EQ(limiter_->stats().local_denials, 0u);
  EXPECT_EQ(limiter_->stats().local_denial_entries, 0u);
}

TEST_F(local_denial_test, the_limiter_wide_switch_turns_them_off) {
  limiter_options o;
  o.local_denials = false;
  make(o);
  ASSERT_TRUE(check(bucket, 5).decision.allowed);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(check(bucket, 5).local);
  EXPECT_EQ(calls(), 11);
}

TEST_F(local_denial_test, a_same_named_policy_with_another_limit_is_not_matched) {
  ASSERT_TRUE(check(bucket, 5).decision.allowed);
  ASSERT_FALSE(check(bucket, 1).decision.allowed);
  const policy bigger{"bucket", algorithm::token_bucket, 1, 1000ms, 6};
  EXPECT_FALSE(check(bigger, 1).local);
  EXPECT_EQ(calls(), 3);
}

TEST_F(local_denial_test, a_flood_on_a_denied_key_makes_almost_no_backend_calls) {
  const policy hot{"hot", algorithm::sliding_log, 10, 1s};
  std::vector<std::thread> threads;
  std::atomic<int> admitted{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        if (check(hot).decision.allowed) admitted.fetch_add(1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 10);
  // 10 admissions, then one denial per thread at most before one is remembered.
  EXPECT_LE(calls(), 10 + 8 + 8);
  EXPECT_GE(limiter_->stats().local_denials, 8000u - 10 - 16);
}

TEST_F(local_denial_test, memory_stays_bounded_under_many_distinct_keys) {
  limiter_options o;
  o.max_local_denial_entries = 1000;
  make(o);
  const policy one{"one", algorithm::gcra, 1, 1h, 1};
  for (int i = 0; i < 20'000; ++i) {
    const std::string key = "user" + std::to_string(i);
    ASSERT_TRUE(limiter_->check(key, one).decision.allowed);
    ASSERT_FALSE(limiter_->check(key, one).decision.allowed);
    ASSERT_LE(limiter_->stats().local_denial_entries, 1000u);
  }
  EXPECT_GT(limiter_->stats().local_denial_entries, 500u) << "recent denials are kept";
  EXPECT_TRUE(limiter_->check("user19999", one).local);
}

TEST(local_denials, not_used_with_the_memory_backend) {
  test_clock clock;
  limiter l{memory_on(clock), on_clock(clock)};
  const policy p{"mem", algorithm::fixed_window, 1, 1s};
  ASSERT_TRUE(l.check("k", p).decision.allowed);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(l.check("k", p).local);
  EXPECT_EQ(l.stats().local_denials, 0u);
}

decision denied_for(std::int64_t retry) {
  decision d;
  d.limit = 5;
  d.retry_after = std::chrono::milliseconds{retry};
  // (decision::never stays never: never + 50 overflowed, which the UBSan lane reported.)
  d.reset_after =
      std::chrono::milliseconds{retry > decision::never.count() - 50 ? retry : retry + 50};
  return d;
}

TEST(deny_cache, an_answer_sent_before_a_reset_is_not_remembered) {
  detail::deny_cache cache(100, 1000, 0);
  const policy p{"p", algorithm::gcra, 5, 1s};
  const auto epoch = cache.epoch();
  cache.reset("k", p);  // completes while the check is in flight
  cache.learn("k", p, 1, 0, epoch, denied_for(500));
  EXPECT_EQ(cache.size(), 0u);
  cache.learn("k", p, 1, 0, cache.epoch(), denied_for(500));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(deny_cache, with_slack_a_denial_ends_that_much_early) {
  detail::deny_cache cache(100, 1000, 1);
  const policy p{"p", algorithm::gcra, 5, 1s};
  cache.learn("k", p, 1, 10, cache.epoch(), denied_for(500));
  ASSERT_TRUE(cache.find("k", p, 1, 508));
  EXPECT_EQ(cache.find("k", p, 1, 508)->retry_after, 2ms);
  EXPECT_EQ(cache.find("k", p, 1, 508)->reset_after, 52ms);
  EXPECT_FALSE(cache.find("k", p, 1, 509)) << "the last ms before retry goes to the backend";
}

TEST(deny_cache, long_keys_and_never_are_not_remembered) {
  detail::deny_cache cache(100, 1000, 0);
  const policy p{"p", algorithm::gcra, 5, 1s};
  cache.learn(std::string(detail::deny_cache::max_key_size + 1, 'k'), p, 1, 0, cache.epoch(),
              denied_for(500));
  cache.learn("k", p, 1, 0, cache.epoch(), denied_for(decision::never.count()));
  cache.learn("k", p, 0, 0, cache.epoch(), denied_for(500));
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace floodgate
