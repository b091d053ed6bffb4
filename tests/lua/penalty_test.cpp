// Penalties (lua/penalty.lua, lua/multi_block.lua) against src/core/penalty.cpp and the step
// functions: random sequences of one- and two-item checks with block_for on the same injected
// clock must get the same decisions, the block keys their PTTL, and every retry_after must be
// exact (docs/algorithms.md, "Penalties").
#include "core/penalty.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>

#include "script_client.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t start_ms = 1'800'000'000'000;

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

struct lane {
  algorithm algo;
  core::params p;
  std::int64_t block_for;  // 0: none
};

// One key of the model: the algorithm's state and the end of its block.
struct model {
  explicit model(algorithm a) : state(core::empty_state(a)) {}
  core::any_state state;
  std::int64_t until = 0;  // no block: 0
  bool blocked_once = false;
};

// What both backends do before deciding: a block further than block_for away is cut.
void cut(model& m, const lane& l, std::int64_t now) {
  if (l.block_for > 0 && m.until > now + l.block_for) m.until = now + l.block_for;
}

core::penalty_result decide(model m, const lane& l, std::int64_t now, std::int64_t cost) {
  cut(m, l, now);
  const decision d = core::decide(m.state, now, l.p, cost);
  if (l.block_for == 0) return {d, d.allowed && cost > 0, false};
  return core::penalize(d, cost, core::block_left(m.until, now, l.block_for), l.block_for);
}

TEST(penalty, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  long allowed = 0, refused = 0, blocked = 0, starts = 0;
  for (std::uint64_t seq = 0; seq < 60; ++seq) {
    std::mt19937_64 rng(seq ^ 0xb10c);
    // Windows of a minute or more and blocks of 5 s or more: no key expires in real time
    // during a sequence (milliseconds), so Redis holds what the model holds; a state past its
    // expiry decides like the empty one anyway (differential_test.cpp checks that).
    std::vector<lane> lanes;
    for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                   algorithm::token_bucket, algorithm::gcra}) {
      const std::int64_t limit = uniform(rng, 1, 6), w = uniform(rng, 60'000, 120'000);
      const std::int64_t b = takes_burst(a) ? uniform(rng, 1, 8) : limit;
      lanes.push_back({a, {limit, w, b}, uniform(rng, 0, 3) == 0 ? 0 : uniform(rng, 5'000, 3 * w)});
    }
    std::map<std::string, model> models;
    std::int64_t now = start_ms + uniform(rng, 0, 1'000'000);
    struct expected {
      std::string what;
      std::vector<ints5> decisions;
      std::vector<std::pair<std::string, std::int64_t>> block_ttls;  // started blocks
    };
    std::vector<expected> all;
    for (int step = 0; step < 150; ++step) {
      const std::int64_t r = uniform(rng, 0, 99);
      now += r < 30   ? 0
             : r < 80 ? uniform(rng, 1, 5'000)
             : r < 95 ? uniform(rng, 5'000, 200'000)
                      : -uniform(rng, 1, 3'000);
      const std::size_t n = uniform(rng, 0, 3) == 0 ? 2 : 1;
      std::vector<std::size_t> picks;
      while (picks.size() < n) {
        const auto li = static_cast<std::size_t>(uniform(rng, 0, 4));
        if (picks.empty() || picks[0] != li) picks.push_back(li);
      }
      std::vector<script_client::item> items;
      std::vector<std::int64_t> block_for;
      std::vector<core::penalty_result> results;
      expected e;
      std::ostringstream what;
      what << "seq " << seq << " step " << step << " now " << now << ":";
      bool all_allowed = true;
      for (auto li : picks) {
        const lane& l = lanes[li];
        const std::string key = "p" + std::to_string(seq) + ":" + std::string(to_string(l.algo));
        const std::int64_t cost = uniform(rng, 0, 9) == 0 ? 0 : uniform(rng, 1, 2);
        model& m = models.try_emplace(key, l.algo).first->second;
        cut(m, l, now);
        const auto res = decide(m, l, now, cost);
        if (!res.d.allowed && res.d.retry_after != decision::never) {
          // Exact: retrying at now + retry_after passes, a ms earlier it does not (nothing
          // else arriving: the earlier try is not applied).
          const std::int64_t at = now + res.d.retry_after.count();
          model later = m;
          if (res.starts) later.until = now + l.block_for;
          if (!decide(later, l, at, cost).d.allowed || decide(later, l, at - 1, cost).d.allowed)
            FAIL() << what.str() << " " << key << ": retry_after " << res.d.retry_after.count()
                   << " is not exact";
        }
        what << " [" << to_string(l.algo) << " L=" << l.p.limit << " W=" << l.p.window
             << " B=" << l.p.burst << " block " << l.block_for << " cost " << cost << "]";
        items.push_back({l.algo, key, l.p, cost});
        block_for.push_back(l.block_for);
        results.push_back(res);
        e.decisions.push_back(as_ints(res.d));
        all_allowed = all_allowed && res.d.allowed;
      }
      for (std::size_t i = 0; i < n; ++i) {
        const lane& l = lanes[picks[i]];
        model& m = models.at(items[i].key);
        if (all_allowed && items[i].cost > 0) core::commit(m.state, now, l.p, items[i].cost);
        if (results[i].starts) {
          m.until = now + l.block_for;
          e.block_ttls.emplace_back(items[i].key + ":bk", l.block_for);
          ++starts;
        }
        if (results[i].d.allowed && items[i].cost > 0)
          ++allowed;
        else if (items[i].cost > 0)
          ++refused;
        if (core::block_left(m.until, now, l.block_for) > 0) ++blocked;
      }
      e.what = what.str();
      redis.append(script_client::eval_multi_block(items, block_for, now));
      for (const auto& [k, ttl] : e.block_ttls) redis.append({"PTTL", k});
      all.push_back(std::move(e));
    }
    for (const auto& e : all) {
      const reply r = redis.read();
      ASSERT_NE(r.kind, reply::error) << e.what << "\n  error reply: " << r.str;
      ASSERT_EQ(r.elements.size(), 5 * e.decisions.size()) << e.what;
      for (std::size_t i = 0; i < e.decisions.size(); ++i) {
        const auto got = ints_of(r, i);
        ASSERT_TRUE(got && *got == e.decisions[i])
            << e.what << "\n  item " << i << ": lua " << (got ? to_string(*got) : "?") << " vs C++ "
            << to_string(e.decisions[i]);
      }
      for (const auto& [k, ttl] : e.block_ttls) {
        const reply t = redis.read();
        // Real time passes between the write and the read: a second of slack.
        EXPECT_TRUE(t.kind == reply::number && t.integer <= ttl && t.integer > ttl - 1'000)
            << e.what << " PTTL " << k << " = " << t.integer << ", block_for " << ttl;
      }
    }
  }
  std::cout << "[ stats    ] penalty: " << allowed << " allowed, " << refused << " refused, "
            << starts << " blocks started, " << blocked << " item-steps blocked\n";
  EXPECT_GT(allowed, 0);
  EXPECT_GT(starts, 0);
  EXPECT_GT(refused, starts);  // some refusals came from blocks in force
}

TEST(penalty, bad_block_for_is_refused) {
  redis_server server;
  script_client redis{server.port()};
  for (const char* bad : {"-1", "1e3", "", "10000000000000000", "x"}) {
    auto cmd = script_client::eval_multi_block(
        {{algorithm::fixed_window, "bad:k", {1, 1000, 1}, 1}}, {0}, start_ms);
    cmd.back() = bad;
    const reply r = redis.run(cmd);
    EXPECT_EQ(r.kind, reply::error) << bad;
    EXPECT_NE(r.str.find("block_for_ms"), std::string::npos) << r.str;
  }
}

}  // namespace
}  // namespace floodgate::test
