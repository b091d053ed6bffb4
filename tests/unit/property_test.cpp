// Random request sequences against the pure step functions: whatever the sequence, no
// algorithm admits more than its definition allows, and every retry_after / reset_after it
// reports is exact.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/step.hpp"

namespace floodgate::core {
namespace {

struct admitted {
  std::int64_t at, cost;
};

struct run_result {
  std::vector<admitted> log;
  std::vector<decision> decisions;
};

// Drives one key through `steps` random requests. Checks exactness of every decision's
// retry_after and reset_after on copies of the state as it goes.
run_result drive(algorithm algo, const params& p, std::uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  const std::int64_t capacity = p.burst;
  std::uniform_int_distribution<std::int64_t> step_ms(0, p.window / 3);
  std::uniform_int_distribution<std::int64_t> cost_of(0, capacity);
  any_state state = empty_state(algo);
  std::int64_t now = 1'700'000'000'000 + static_cast<std::int64_t>(seed % 977);
  run_result out;
  for (int i = 0; i < steps; ++i) {
    now += (rng() % 4 == 0) ? 0 : step_ms(rng);  // a quarter land in the same millisecond
    const std::int64_t cost = (rng() % 3 == 0) ? 1 : cost_of(rng);
    const decision d = decide(state, now, p, cost);
    out.decisions.push_back(d);
    if (!d.allowed) {
      const std::int64_t wait = d.retry_after.count();
      EXPECT_GT(wait, 0);
      EXPECT_FALSE(decide(state, now + wait - 1, p, cost).allowed)
          << to_string(algo) << " step " << i << ": admitted 1 ms before retry_after";
      EXPECT_TRUE(decide(state, now + wait, p, cost).allowed)
          << to_string(algo) << " step " << i << ": denied at retry_after " << wait;
      continue;
    }
    if (cost > 0) {
      commit(state, now, p, cost);
      out.log.push_back({now, cost});
    }
    const std::int64_t reset = d.reset_after.count();
    EXPECT_EQ(decide(state, now + reset, p, 0).remaining, capacity)
        << to_string(algo) << " step " << i << ": not full at reset_after";
    if (reset > 0) {
      EXPECT_LT(decide(state, now + reset - 1, p, 0).remaining, capacity)
          << to_string(algo) << " step " << i << ": full before reset_after";
    }
    if (cost > 0) {
      EXPECT_GE(expiry(state, now, p), std::max<std::int64_t>(reset, 1))
          << "written state would expire while it still matters";
    }
  }
  return out;
}

// Sum of admitted cost with at in [from, to].
std::int64_t admitted_between(const std::vector<admitted>& log, std::int64_t from,
                              std::int64_t to) {
  std::int64_t sum = 0;
  for (const auto& a : log)
    if (a.at >= from && a.at <= to) sum += a.cost;
  return sum;
}

constexpr int seeds = 60, steps = 400;

TEST(property, sliding_log_never_admits_more_than_limit_in_any_window) {
  const params p{7, 1000, 7};
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const auto run = drive(algorithm::sliding_log, p, seed, steps);
    for (const auto& a : run.log)
      ASSERT_LE(admitted_between(run.log, a.at - p.window + 1, a.at), p.limit) << "seed " << seed;
  }
}

TEST(property, fixed_and_sliding_window_never_exceed_limit_per_aligned_window) {
  const params p{9, 1000, 9};
  for (auto algo : {algorithm::fixed_window, algorithm::sliding_window}) {
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
      const auto run = drive(algo, p, seed, steps);
      std::map<std::int64_t, std::int64_t> per_window;
      for (const auto& a : run.log) per_window[a.at - a.at % p.window] += a.cost;
      for (const auto& [start, sum] : per_window)
        ASSERT_LE(sum, p.limit) << to_string(algo) << " seed " << seed << " window " << start;
    }
  }
}

TEST(property, sliding_window_never_exceeds_twice_the_limit_in_any_window) {
  const params p{9, 1000, 9};
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const auto run = drive(algorithm::sliding_window, p, seed, steps);
    for (const auto& a : run.log)
      ASSERT_LE(admitted_between(run.log, a.at - p.window + 1, a.at), 2 * p.limit);
  }
}

TEST(property, buckets_conform_to_burst_plus_rate) {
  // Over any interval [a, b]: admitted <= burst + (b - a) * limit / window.
  const params p{5, 1000, 3};
  for (auto algo : {algorithm::token_bucket, algorithm::gcra}) {
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
      const auto run = drive(algo, p, seed, steps);
      for (std::size_t i = 0; i < run.log.size(); ++i)
        for (std::size_t j = i; j < run.log.size(); ++j) {
          const std::int64_t span = run.log[j].at - run.log[i].at;
          ASSERT_LE(admitted_between(run.log, run.log[i].at, run.log[j].at) * p.window,
                    p.burst * p.window + span * p.limit)
              << to_string(algo) << " seed " << seed;
        }
    }
  }
}

TEST(property, gcra_and_token_bucket_make_identical_decisions) {
  for (const params p : {params{5, 1000, 3}, params{7, 60'000, 2}, params{1000, 1000, 1000}}) {
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
      const auto a = drive(algorithm::gcra, p, seed, steps);
      const auto b = drive(algorithm::token_bucket, p, seed, steps);
      ASSERT_EQ(a.decisions, b.decisions) << "seed " << seed;
    }
  }
}

TEST(property, exact_algorithms_admit_something_eventually) {
  // Liveness: a denied request always has a finite retry_after (checked in drive) and a long
  // enough random run admits a substantial share.
  const params p{10, 1000, 10};
  for (auto algo : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                    algorithm::token_bucket, algorithm::gcra}) {
    const auto run = drive(algo, p, 42, steps);
    EXPECT_GT(run.log.size(), static_cast<std::size_t>(steps / 10)) << to_string(algo);
  }
}

}  // namespace
}  // namespace floodgate::core

namespace floodgate::core {
namespace {

TEST(clock_steps_back, a_peek_is_still_allowed_and_a_retry_still_exact) {
  const params p{5, 1000, 5};  // capacity 5 for every algorithm
  for (auto algo : {algorithm::token_bucket, algorithm::gcra, algorithm::sliding_log}) {
    any_state s = empty_state(algo);
    const std::int64_t t = 1'700'000'000'000;
    commit(s, t, p, 5);
    const std::int64_t back = t - 3'600'000;  // the clock steps back an hour
    const decision peek = decide(s, back, p, 0);
    EXPECT_TRUE(peek.allowed) << to_string(algo);
    const decision denied = decide(s, back, p, 1);
    ASSERT_FALSE(denied.allowed) << to_string(algo) << ": a step back must not refill";
    EXPECT_FALSE(decide(s, back + denied.retry_after.count() - 1, p, 1).allowed) << to_string(algo);
    EXPECT_TRUE(decide(s, back + denied.retry_after.count(), p, 1).allowed) << to_string(algo);
  }
}

}  // namespace
}  // namespace floodgate::core
