// The Lua scripts against the C++ step functions (src/core), the two implementations of
// docs/algorithms.md: random request sequences with the same injected clock must get the same
// decision, field by field, and every key a script writes must carry core::expiry() as PTTL.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <sstream>

#include "script_client.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t start_ms = 1'800'000'000'000;
constexpr std::int64_t max_now_ms = 1'000'000'000'000'000;  // what the scripts accept
constexpr std::int64_t max_cost = 1'000'000'000'000'000;
// Redis expires keys in real time while the injected clock runs far faster. A key whose
// expiry is longer than this outlives a whole sequence (milliseconds of real time); one with
// a shorter expiry may vanish mid-sequence, so the next request on it is moved to after that
// expiry in injected time too (a state past its expiry must decide like the empty state,
// which every step checks).
constexpr std::int64_t short_expiry_ms = 5'000;

constexpr std::array<algorithm, 5> all_algorithms = {
    algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
    algorithm::token_bucket, algorithm::gcra};

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// One policy and the keys it is checked on.
struct lane {
  algorithm algo;
  core::params p;
  std::int64_t capacity() const { return p.burst; }
};

// How a sequence draws its clock steps and costs.
struct shape {
  // Steps as (percent, lo, hi) buckets in ms; a negative range steps the clock back.
  std::vector<std::array<std::int64_t, 3>> steps;
  bool extreme_costs = false;  // also costs near the capacity and huge ones
};

shape ordinary_shape(const lane& l) {
  const std::int64_t w = l.p.window;
  return {{{25, 0, 0}, {55, 1, w / 10}, {14, w / 10, w}, {3, w, 3 * w}, {3, -w / 2, -1}}, false};
}

std::int64_t draw_step(std::mt19937_64& rng, const shape& s) {
  std::int64_t r = uniform(rng, 0, 99);
  for (const auto& [percent, lo, hi] : s.steps) {
    if (r < percent) return uniform(rng, lo, hi);
    r -= percent;
  }
  return 0;
}

std::int64_t draw_cost(std::mt19937_64& rng, const lane& l, const shape& s) {
  const std::int64_t cap = l.capacity(), r = uniform(rng, 0, 99);
  if (r < 55) return 1;
  if (r < 65) return 0;
  if (s.extreme_costs && r < 85) {
    const std::int64_t picks[] = {2, cap - 1, cap, cap + 1, cap / 2};
    return std::clamp<std::int64_t>(picks[uniform(rng, 0, 4)], 0, max_cost);
  }
  return uniform(rng, 0, std::min<std::int64_t>(cap + 1, 40));
}

struct counts {
  long allowed = 0, denied = 0, never = 0, peeks = 0, writes = 0;
};

// What one step expects back: the script's reply, then one PTTL per item.
struct expectation {
  std::string what;  // the step, for failure messages
  std::vector<ints5> decisions;
  struct ttl {
    std::string key;
    long long lo, hi;  // the PTTL must be in [lo, hi]...
    bool may_be_gone;  // ...or -2 (no key)
    // Written by this step: lo is hi minus the real time the whole run took (the most that
    // can have passed between the write and its PTTL, read right after it), set once known.
    bool fresh = false;
  };
  std::vector<ttl> ttls;
};

class runner {
 public:
  runner(script_client& redis, std::vector<lane> lanes, std::string prefix, bool multi)
      : redis_(redis), lanes_(std::move(lanes)), prefix_(std::move(prefix)), multi_(multi) {}

  // Runs `steps` random steps (pipelined), then compares. Returns the first mismatch, if any.
  std::optional<std::string> run(std::uint64_t seed, int steps, const std::vector<shape>& shapes,
                                 std::int64_t now, counts& stats) {
    std::mt19937_64 rng(seed);
    std::vector<expectation> expected;
    const auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      struct pick {
        std::size_t lane;
        std::string key;
        std::int64_t cost;
      };
      std::vector<pick> picks;
      const std::size_t n = multi_ ? static_cast<std::size_t>(uniform(rng, 1, 3)) : 1;
      while (picks.size() < n) {
        const auto li =
            static_cast<std::size_t>(uniform(rng, 0, static_cast<std::int64_t>(lanes_.size()) - 1));
        const std::string key = prefix_ + std::string(to_string(lanes_[li].algo)) + ":{k" +
                                std::to_string(uniform(rng, 0, 2)) + "}";
        if (std::any_of(picks.begin(), picks.end(), [&](const pick& p) { return p.key == key; }))
          continue;
        picks.push_back({li, key, draw_cost(rng, lanes_[li], shapes[li])});
      }
      now += draw_step(rng, shapes[picks[0].lane]);
      for (const auto& p : picks) {
        const model_key& m = model(p.key, lanes_[p.lane].algo);
        if (m.written && m.expiry < short_expiry_ms) now = std::max(now, m.written_at + m.expiry);
      }
      now = std::clamp<std::int64_t>(now, 0, max_now_ms);

      expectation e;
      std::ostringstream what;
      what << "seed " << seed << " step " << i << " now " << now << ":";
      bool all_allowed = true;
      std::vector<script_client::item> items;
      for (const auto& p : picks) {
        const lane& l = lanes_[p.lane];
        model_key& m = model(p.key, l.algo);
        const decision d = m.decide(now, l.p, p.cost);
        if (m.expired(now) && core::decide(m.empty, now, l.p, p.cost) != d)
          return what.str() + " " + p.key + " decides unlike the empty state after its expiry";
        // The doc's promise, which the scripts inherit: retrying at now + retry_after
        // succeeds and 1 ms earlier fails (here also after backwards clock steps).
        if (!d.allowed && d.retry_after != decision::never) {
          const std::int64_t at = now + d.retry_after.count();
          if (!m.decide(at, l.p, p.cost).allowed || m.decide(at - 1, l.p, p.cost).allowed)
            return what.str() + " " + p.key + ": retry_after " +
                   std::to_string(d.retry_after.count()) + " is not exact";
        }
        e.decisions.push_back(as_ints(d));
        all_allowed = all_allowed && d.allowed;
        what << " [" << to_string(l.algo) << " L=" << l.p.limit << " W=" << l.p.window
             << " B=" << l.p.burst << " " << p.key << " cost " << p.cost << "]";
        items.push_back({l.algo, p.key, l.p, p.cost});
        if (p.cost == 0)
          ++stats.peeks;
        else if (d.allowed)
          ++stats.allowed;
        else if (d.retry_after == decision::never)
          ++stats.never;
        else
          ++stats.denied;
      }
      for (const auto& p : picks) {
        const lane& l = lanes_[p.lane];
        model_key& m = model(p.key, l.algo);
        if (all_allowed && p.cost > 0) {
          const std::int64_t x = m.commit(now, l.p, p.cost);
          ++stats.writes;
          if (x < 1)
            return what.str() + " " + p.key + ": core::expiry " + std::to_string(x) + " < 1";
          // From the write that set the expiry: fixed_window's INCRBY keeps the one before.
          const std::int64_t at = m.written_at + x;
          if (core::decide(m.state, at, l.p, 1) != core::decide(m.empty, at, l.p, 1))
            return what.str() + " " + p.key + ": the state still matters at its expiry";
          e.ttls.push_back({p.key, 0, x, false, true});
        } else if (!m.written) {
          e.ttls.push_back({p.key, -2, -2, true});  // nothing was ever written: no key
        } else {
          e.ttls.push_back({p.key, 0, m.expiry, true});  // untouched: never without a TTL
        }
      }
      e.what = what.str();
      redis_.append(multi_ ? script_client::eval_multi(items, now)
                           : script_client::eval(items[0].algo, items[0].key, items[0].p,
                                                 items[0].cost, now));
      for (const auto& p : picks) redis_.append({"PTTL", p.key});
      expected.push_back(std::move(e));
    }

    std::optional<std::string> failure;
    for (auto& e : expected) {  // read every reply, report the first mismatch
      const reply r = redis_.read();
      for (std::size_t i = 0; i < e.decisions.size() && !failure; ++i) {
        const auto got = ints_of(r, i);
        if (r.kind == reply::error)
          failure = e.what + "\n  error reply: " + r.str;
        else if (!got || *got != e.decisions[i] || r.elements.size() != 5 * e.decisions.size())
          failure = e.what + "\n  item " + std::to_string(i) + ": lua " +
                    (got ? to_string(*got) : "(not 5 integers)") + " vs C++ " +
                    to_string(e.decisions[i]);
      }
      for (auto& t : e.ttls) {
        const reply pttl = redis_.read();
        if (t.fresh) {  // whole ms, rounded up, plus Redis's own ms rounding
          const long long elapsed =
              std::chrono::ceil<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                          started)
                  .count() +
              1;
          t.lo = std::max<long long>(0, t.hi - elapsed);
          t.may_be_gone = t.hi <= elapsed;
        }
        const bool ok =
            pttl.kind == reply::number && ((pttl.integer >= t.lo && pttl.integer <= t.hi) ||
                                           (t.may_be_gone && pttl.integer == -2));
        if (!ok && !failure)
          failure = e.what + "\n  PTTL " + t.key + " = " + std::to_string(pttl.integer) +
                    ", expected " + std::to_string(t.lo) + ".." + std::to_string(t.hi) +
                    (t.may_be_gone ? " or -2" : "");
      }
    }
    return failure;
  }

 private:
  model_key& model(const std::string& key, algorithm a) {
    return models_.try_emplace(key, a).first->second;
  }

  script_client& redis_;
  std::vector<lane> lanes_;
  std::string prefix_;
  bool multi_;
  std::map<std::string, model_key> models_;
};

lane random_lane(std::mt19937_64& rng, algorithm a) {
  const std::int64_t l = uniform(rng, 1, 12);
  const std::int64_t b = takes_burst(a) ? uniform(rng, 1, 16) : l;
  return {a, {l, uniform(rng, 60'000, 150'000), b}};
}

void expect_both_outcomes(const counts& c, const std::string& what) {
  EXPECT_GT(c.allowed, 0) << what;
  EXPECT_GT(c.denied, 0) << what;
  EXPECT_GT(c.never, 0) << what;
  EXPECT_GT(c.peeks, 0) << what;
  std::cout << "[ stats    ] " << what << ": " << c.allowed << " allowed, " << c.denied
            << " denied, " << c.never << " never, " << c.peeks << " peeks, " << c.writes
            << " writes\n";
}

class single_key : public ::testing::TestWithParam<algorithm> {};

// 200 sequences x 200 steps on 3 keys, each sequence with its own random policy.
TEST_P(single_key, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  const algorithm a = GetParam();
  counts stats;
  for (std::uint64_t seq = 0; seq < 200; ++seq) {
    const std::uint64_t seed = seq * 7919 + static_cast<std::uint64_t>(a);
    std::mt19937_64 rng(seed ^ 0x5eed);
    const lane l = random_lane(rng, a);
    runner run{redis, {l}, "s" + std::to_string(seq) + ":", false};
    const auto failure =
        run.run(seed, 200, {ordinary_shape(l)}, start_ms + uniform(rng, 0, 10 * l.p.window), stats);
    ASSERT_FALSE(failure) << *failure;
  }
  expect_both_outcomes(stats, std::string(to_string(a)));
}

INSTANTIATE_TEST_SUITE_P(lua, single_key, ::testing::ValuesIn(all_algorithms), algorithm_name);

// check_all: 1-3 items per call over every algorithm, all-or-nothing against the same model.
TEST(multi, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  counts stats;
  for (std::uint64_t seq = 0; seq < 200; ++seq) {
    std::mt19937_64 rng(seq ^ 0x3a11);
    std::vector<lane> lanes;
    std::vector<shape> shapes;
    for (auto a : all_algorithms) {
      lanes.push_back(random_lane(rng, a));
      shapes.push_back(ordinary_shape(lanes.back()));
    }
    runner run{redis, lanes, "m" + std::to_string(seq) + ":", true};
    const auto failure = run.run(seq, 200, shapes, start_ms + uniform(rng, 0, 1'000'000), stats);
    ASSERT_FALSE(failure) << *failure;
  }
  expect_both_outcomes(stats, "multi");
}

// Policies at the bounds (limit x window = 1e15, window 1 ms, huge windows), huge costs and
// long backwards clock steps: where doubles and int64_t would part ways if either side formed
// a product the policy bound does not cover (gcra's (TAT - now) x limit after a step back: the
// lanes with limit ~1e8 keep a long expiry, so their steps back are not undone, see above).
TEST(extremes, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  constexpr std::int64_t e15 = 1'000'000'000'000'000;
  const std::vector<lane> lanes = {
      {algorithm::gcra, {e15, 1, 1}},
      {algorithm::gcra, {1, 1, e15}},
      {algorithm::gcra, {7, e15 / 13, 13}},
      {algorithm::gcra, {999'983, 1'000'000'000, 1'000'000}},
      {algorithm::gcra, {99'999'989, 10'000'001, 99'999'989}},
      {algorithm::token_bucket, {e15, 1, 1}},
      {algorithm::token_bucket, {1, 1, e15}},
      {algorithm::token_bucket, {7, e15 / 13, 13}},
      {algorithm::token_bucket, {999'983, 1'000'000'000, 1'000'000}},
      {algorithm::token_bucket, {99'999'989, 10'000'001, 99'999'989}},
      {algorithm::fixed_window, {e15, 1, e15}},
      {algorithm::fixed_window, {3, e15 / 3, 3}},
      {algorithm::sliding_window, {1'000'000'007, 999'983, 1'000'000'007}},
      {algorithm::sliding_window, {3, 333'333'333'333'333, 3}},
      {algorithm::sliding_log, {1000, 1'000'000'000'000, 1000}},
      {algorithm::sliding_log, {5, 1, 5}},
  };
  counts stats;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const lane& l = lanes[i];
    const std::int64_t w = std::min<std::int64_t>(l.p.window, 1'000'000'000'000);
    const shape s{{{20, 0, 0},
                   {40, 1, std::max<std::int64_t>(1, w / 10)},
                   {20, w / 2, 2 * w},
                   {20, -1'000'000'000'000, -1}},
                  true};
    for (std::uint64_t seq = 0; seq < 20; ++seq) {
      runner run{redis, {l}, "x" + std::to_string(i) + ":" + std::to_string(seq) + ":", false};
      const auto failure = run.run(1000 * i + seq, 100, {s}, start_ms, stats);
      ASSERT_FALSE(failure) << *failure;
    }
  }
  std::cout << "[ stats    ] extremes: " << stats.allowed << " allowed, " << stats.denied
            << " denied, " << stats.never << " never, " << stats.writes << " writes\n";
  EXPECT_GT(stats.allowed, 0);
  EXPECT_GT(stats.denied, 0);
}

}  // namespace
}  // namespace floodgate::test
