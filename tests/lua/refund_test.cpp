// Refunds (lua/refund.lua) against src/core/refund.cpp: random sequences of checks and
// refunds on one key per algorithm, on the same injected clock, must get the same decisions
// (a refund answers a peek after it), and the key the same expiry (docs/algorithms.md,
// "Refunds"); a refund never makes more than the capacity available.
#include "core/refund.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>

#include "redis/scripts.hpp"
#include "script_client.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t start_ms = 1'800'000'000'000;
// As in differential_test.cpp: a key whose expiry is shorter may vanish in real time, so the
// next request on it is moved past that expiry in injected time too.
constexpr std::int64_t short_expiry_ms = 5'000;

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

std::vector<std::string> eval_refund(algorithm a, const std::string& key, const core::params& p,
                                     std::int64_t cost, std::int64_t now) {
  return {"EVALSHA",
          std::string(redis::refund_script().sha1),
          "1",
          key,
          std::string(to_string(a)),
          str(p.limit),
          str(p.window),
          str(p.burst),
          str(cost),
          str(now)};
}

class refund : public ::testing::TestWithParam<algorithm> {};

TEST_P(refund, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  const algorithm a = GetParam();
  ASSERT_EQ(redis.run({"SCRIPT", "LOAD", std::string(redis::refund_script().source)}).str,
            redis::refund_script().sha1);
  long refunds = 0, gave_back = 0, checks = 0;
  for (std::uint64_t seq = 0; seq < 100; ++seq) {
    std::mt19937_64 rng(seq * 31 + static_cast<std::uint64_t>(a));
    const std::int64_t limit = uniform(rng, 1, 10), w = uniform(rng, 60'000, 150'000);
    const core::params p{limit, w, takes_burst(a) ? uniform(rng, 1, 12) : limit};
    const std::string key = "r" + str(static_cast<std::int64_t>(seq)) + ":{k}";
    model_key m{a};
    std::int64_t now = start_ms + uniform(rng, 0, 10 * w);
    struct expected {
      std::string what;
      ints5 decision;
      bool refund;
      long long ttl_lo, ttl_hi;  // the PTTL after a refund (-2: no key); unchecked if lo > hi
    };
    std::vector<expected> all;
    for (int step = 0; step < 150; ++step) {
      const std::int64_t r = uniform(rng, 0, 99);
      now += r < 30   ? 0
             : r < 85 ? uniform(rng, 1, w / 10)
             : r < 97 ? uniform(rng, w / 10, 2 * w)
                      : -uniform(rng, 1, w / 4);
      if (m.written && m.expiry < short_expiry_ms) now = std::max(now, m.written_at + m.expiry);
      const std::int64_t cost = uniform(rng, 1, std::min<std::int64_t>(p.burst, 4));
      std::ostringstream what;
      what << to_string(a) << " L=" << p.limit << " W=" << p.window << " B=" << p.burst << " seq "
           << seq << " step " << step << " now " << now;
      if (uniform(rng, 0, 2) == 0) {  // a refund
        const std::int64_t before = m.decide(now, p, 0).remaining;
        core::refund(m.state, now, p, cost);
        const decision d = m.decide(now, p, 0);
        if (d.remaining > p.burst || d.remaining > before + cost)
          FAIL() << what.str() << ": refund of " << cost << " made " << d.remaining
                 << " available (before " << before << ")";
        gave_back += d.remaining - before;
        // Windows keep the expiry their last check wrote (KEEPTTL: in Redis's real time, which
        // barely moves here); the others write core::expiry, or delete an emptied state.
        long long lo = -2, hi = -2;
        if (a == algorithm::fixed_window || a == algorithm::sliding_window) {
          if (m.written) {
            lo = std::max<long long>(0, m.expiry - 1'000);
            hi = m.expiry;
          }
        } else {
          const std::int64_t x = core::expiry(m.state, now, p);
          m.written = true;
          m.written_at = now;
          m.expiry = x;
          if (x > 0) {
            lo = std::max<long long>(0, x - 1'000);
            hi = x;
          }
        }
        all.push_back({what.str() + " refund " + str(cost), as_ints(d), true, lo, hi});
        redis.append(eval_refund(a, key, p, cost, now));
        redis.append({"PTTL", key});
        ++refunds;
      } else {
        const decision d = m.decide(now, p, cost);
        if (d.allowed) m.commit(now, p, cost);
        all.push_back({what.str() + " check " + str(cost), as_ints(d), false, 1, 0});
        redis.append(script_client::eval(a, key, p, cost, now));
        ++checks;
      }
    }
    for (const auto& e : all) {
      const reply r = redis.read();
      const auto got = ints_of(r);
      ASSERT_TRUE(got && *got == e.decision)
          << e.what << "\n  lua " << (got ? to_string(*got) : r.str) << " vs C++ "
          << to_string(e.decision);
      if (e.refund) {
        const reply t = redis.read();
        if (e.ttl_lo <= e.ttl_hi) {
          EXPECT_TRUE(t.integer >= e.ttl_lo && t.integer <= e.ttl_hi)
              << e.what << ": PTTL " << t.integer << ", expected " << e.ttl_lo << ".." << e.ttl_hi;
        }
      }
    }
  }
  std::cout << "[ stats    ] refund " << to_string(a) << ": " << refunds << " refunds ("
            << gave_back << " units given back), " << checks << " checks\n";
  EXPECT_GT(gave_back, 0);
}

INSTANTIATE_TEST_SUITE_P(lua, refund,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         algorithm_name);

TEST(refund_script, bad_arguments_are_refused) {
  redis_server server;
  script_client redis{server.port()};
  const auto sha = std::string(redis::refund_script().sha1);
  redis.run({"SCRIPT", "LOAD", std::string(redis::refund_script().source)});
  const auto cmd = [&](std::string algo, std::string cost) {
    return std::vector<std::string>{"EVALSHA", sha, "1", "k", algo, "5", "1000", "5", cost, ""};
  };
  EXPECT_NE(redis.run(cmd("gcra", "0")).str.find("at least 1"), std::string::npos);
  EXPECT_NE(redis.run(cmd("leaky", "1")).str.find("algorithm must be"), std::string::npos);
  EXPECT_NE(redis.run(cmd("gcra", "-1")).str.find("cost"), std::string::npos);
  EXPECT_EQ(redis.run({"EXISTS", "k"}).integer, 0);
}

}  // namespace
}  // namespace floodgate::test
