// Refunds (lua/refund.lua) against src/core/refund.cpp: random sequences of checks and
// refunds on one key per algorithm, on the same injected clock, must get the same decisions
// (a refund answers a peek after it), and the key the same expiry (docs/algorithms.md,
// "Refunds"); a refund never makes more than the capacity available.
#include "core/refund.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <sstream>
#include <thread>

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
  long refunds = 0, gave_back = 0, zero_refunds = 0, checks = 0;
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
      std::int64_t given;        // a refund's: the cost it gave back
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
        const std::int64_t given = core::refund(m.state, now, p, cost);
        const decision d = m.decide(now, p, 0);
        if (d.remaining > p.burst || d.remaining > before + cost)
          FAIL() << what.str() << ": refund of " << cost << " made " << d.remaining
                 << " available (before " << before << ")";
        if (given < 0 || given > cost || (given == 0 && d.remaining != before))
          FAIL() << what.str() << ": refund of " << cost << " said it gave back " << given
                 << ", remaining " << before << " -> " << d.remaining;
        gave_back += d.remaining - before;
        zero_refunds += given == 0;
        // Windows keep the expiry their last check wrote (KEEPTTL: in Redis's real time, which
        // barely moves here); the others write redis_expiry, or delete an emptied state.
        long long lo = -2, hi = -2;
        if (a == algorithm::fixed_window || a == algorithm::sliding_window) {
          if (m.written) {
            lo = std::max<long long>(0, m.expiry - 1'000);
            hi = m.expiry;
          }
        } else {
          const std::int64_t x =
              core::expiry(m.state, now, p) > 0 ? redis_expiry(m.state, now, p) : 0;
          m.written = true;
          m.written_at = now;
          m.expiry = x;
          if (x > 0) {
            lo = std::max<long long>(0, x - 1'000);
            hi = x;
          }
        }
        all.push_back({what.str() + " refund " + str(cost), as_ints(d), true, given, lo, hi});
        redis.append(eval_refund(a, key, p, cost, now));
        redis.append({"PTTL", key});
        ++refunds;
      } else {
        const decision d = m.decide(now, p, cost);
        if (d.allowed) m.commit(now, p, cost);
        all.push_back({what.str() + " check " + str(cost), as_ints(d), false, 0, 1, 0});
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
        ASSERT_EQ(r.elements.size(), 7u) << e.what;
        EXPECT_EQ(r.elements[5].integer, e.given) << e.what << ": the cost given back";
        EXPECT_EQ(r.elements[6].integer, 0) << e.what << ": no marker, no replay";
        const reply t = redis.read();
        if (e.ttl_lo <= e.ttl_hi) {
          EXPECT_TRUE(t.integer >= e.ttl_lo && t.integer <= e.ttl_hi)
              << e.what << ": PTTL " << t.integer << ", expected " << e.ttl_lo << ".." << e.ttl_hi;
        }
      }
    }
  }
  std::cout << "[ stats    ] refund " << to_string(a) << ": " << refunds << " refunds ("
            << gave_back << " units given back, " << zero_refunds << " giving back nothing), "
            << checks << " checks\n";
  EXPECT_GT(gave_back, 0);
  EXPECT_GT(zero_refunds, 0) << "refunds of nothing consumed: untried";
}

INSTANTIATE_TEST_SUITE_P(lua, refund,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         algorithm_name);

// The live entries of a sliding log (after `horizon`) as lua/sliding_log.lua writes them:
// '<total>:<own>' and the time.
using log_members = std::vector<std::pair<std::string, std::string>>;

log_members members_of(const core::sliding_log_state& s, std::int64_t horizon) {
  log_members out;
  std::int64_t before = s.base;
  for (const auto& e : s.entries) {
    if (e.time > horizon) out.emplace_back(str(e.total) + ":" + str(e.total - before), str(e.time));
    before = e.total;
  }
  return out;
}

log_members members_in(script_client& redis, const std::string& key, std::int64_t horizon) {
  log_members out;
  const reply r = redis.run({"ZRANGE", key, "(" + str(horizon), "+inf", "BYSCORE", "WITHSCORES"});
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2)
    out.emplace_back(r.elements[i].str, r.elements[i + 1].str);
  return out;
}

// Every command Redis ran since the last CONFIG RESETSTAT, scripts' calls included, apart
// from the EVALSHA that ran them and the CONFIG/INFO around them.
long long commands_run(script_client& redis) {
  const std::string info = redis.run({"INFO", "commandstats"}).str;
  long long calls = 0;
  for (std::size_t at = info.find("cmdstat_"); at != std::string::npos;
       at = info.find("cmdstat_", at + 1)) {
    const auto name_end = info.find(':', at);
    const auto name = info.substr(at + 8, name_end - at - 8);
    if (name == "evalsha" || name.starts_with("config") || name == "info") continue;
    calls += std::stoll(info.substr(info.find("calls=", at) + 6));
  }
  return calls;
}

// Issue 28, item 7: a refund on a long sliding log took a ZREM and a ZRANGE per entry it
// removed (24,000 entries: 115-275 ms of Redis's one thread). Now it finds where to cut by a
// binary search over ranks and removes the newest entries with one ZREMRANGEBYRANK: the
// commands it runs grow with log2 of the log, not with the entries refunded. Checked by
// counting the commands (INFO commandstats counts a script's calls), not by timing, and the
// log left must be the C++ reference's.
TEST(refund_cost, a_sliding_log_refund_runs_few_commands_however_long_the_log) {
  redis_server server;
  script_client redis{server.port()};
  redis.run({"SCRIPT", "LOAD", std::string(redis::refund_script().source)});
  const core::params p{600'000, 3'600'000, 600'000};
  long long calls_at[2] = {0, 0};
  const std::int64_t sizes[2] = {2'000, 20'000};
  for (int run = 0; run < 2; ++run) {
    const std::int64_t n = sizes[run];
    const std::string key = "long" + str(n) + ":{k}";
    model_key m{algorithm::sliding_log};
    for (std::int64_t i = 0; i < n; ++i) {  // one unit per millisecond: n entries
      redis.append(script_client::eval(algorithm::sliding_log, key, p, 1, start_ms + i));
      m.commit(start_ms + i, p, 1);
    }
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(ints_of(redis.read()).value()[0], 1);
    ASSERT_EQ(redis.run({"ZCARD", key}).integer, n);

    const std::int64_t now = start_ms + n, cost = n * 3 / 4 + 1;
    ASSERT_EQ(redis.run({"CONFIG", "RESETSTAT"}).str, "OK");
    const reply r = redis.run(eval_refund(algorithm::sliding_log, key, p, cost, now));
    calls_at[run] = commands_run(redis);
    EXPECT_EQ(core::refund(m.state, now, p, cost), cost);
    const auto got = ints_of(r);
    ASSERT_TRUE(got) << r.str;
    EXPECT_EQ(r.elements.at(5).integer, cost) << "the cost given back";
    EXPECT_EQ(*got, as_ints(m.decide(now, p, 0)));
    EXPECT_EQ(members_in(redis, key, now - p.window),
              members_of(std::get<core::sliding_log_state>(m.state), now - p.window));
  }
  std::cout << "[ stats    ] refund of 3/4 of a sliding log: " << calls_at[0] << " commands at "
            << sizes[0] << " entries, " << calls_at[1] << " at " << sizes[1] << "\n";
  // log2(20,000) < 15 probes, plus a dozen fixed calls (and the peek's): far below the
  // thousands of entries removed.
  EXPECT_LE(calls_at[1], 64);
  EXPECT_LE(calls_at[1] - calls_at[0], 2 * 4 + 2) << "more than the binary search's extra steps";
}

// A refund that empties a long log (every live unit back) dropped the key with DEL, freeing
// each of its entries on Redis's one thread: 12 ms at 24,200 entries, ~300 ms at the 600,000 a
// 10-minute window allows. UNLINK frees it on Redis's lazy-free thread instead.
TEST(refund_cost, a_refund_that_empties_a_long_log_frees_it_off_the_main_thread) {
  redis_server server;
  script_client redis{server.port()};
  redis.run({"SCRIPT", "LOAD", std::string(redis::refund_script().source)});
  const core::params p{600'000, 3'600'000, 600'000};
  const std::int64_t n = 5'000;
  const std::string key = "empty:{k}";
  for (std::int64_t i = 0; i < n; ++i)  // one unit per millisecond: n entries
    redis.append(script_client::eval(algorithm::sliding_log, key, p, 1, start_ms + i));
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(ints_of(redis.read()).value()[0], 1);
  ASSERT_EQ(redis.run({"ZCARD", key}).integer, n);
  auto lazyfreed = [&] {
    const std::string info = redis.run({"INFO", "memory"}).str;  // Redis 7.0 has it there
    const auto at = info.find("lazyfreed_objects:");
    return at == std::string::npos ? -1 : std::stoll(info.substr(at + 18));
  };
  const long long before = lazyfreed();
  ASSERT_GE(before, 0) << "Redis reports no lazyfreed_objects";
  const reply r = redis.run(eval_refund(algorithm::sliding_log, key, p, n, start_ms + n));
  ASSERT_EQ(r.elements.size(), 7u) << r.str;
  EXPECT_EQ(r.elements[5].integer, n);
  EXPECT_EQ(redis.run({"EXISTS", key}).integer, 0);
  // Counted once the lazy-free thread has freed it: wait for that, a second at most.
  for (int i = 0; i < 100 && lazyfreed() == before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(lazyfreed() - before, 1) << "freed on Redis's main thread";
}

// The cut by binary search against core::refund on long logs of uneven entries: many units
// per millisecond, refunds of any size (some cutting an entry in two, some emptying the live
// log), aged-out entries before the live ones; the whole log must match member for member.
TEST(refund_cost, long_sliding_logs_match_cpp_member_for_member) {
  redis_server server;
  script_client redis{server.port()};
  redis.run({"SCRIPT", "LOAD", std::string(redis::refund_script().source)});
  int cut_entries = 0;
  for (std::uint64_t seq = 0; seq < 40; ++seq) {
    std::mt19937_64 rng(seq * 7919 + 17);
    const std::int64_t limit = uniform(rng, 50, 3'000), w = uniform(rng, 60'000, 150'000);
    const core::params p{limit, w, limit};
    const std::string key = "cut" + str(static_cast<std::int64_t>(seq)) + ":{k}";
    model_key m{algorithm::sliding_log};
    std::int64_t now = start_ms;
    std::int64_t written_at = 0, expiry = short_expiry_ms;
    for (int step = 0; step < 400; ++step) {
      now += uniform(rng, 0, 9) < 7 ? uniform(rng, 0, 3) : uniform(rng, 1, w / 3);
      // A key about to expire in real time: past its expiry in injected time too (as above).
      if (expiry < short_expiry_ms) now = std::max(now, written_at + expiry);
      std::ostringstream what;
      what << "L=" << limit << " W=" << w << " seq " << seq << " step " << step;
      if (uniform(rng, 0, 9) < 2) {
        const std::int64_t cost = uniform(rng, 1, uniform(rng, 0, 3) == 0 ? limit : 40);
        const reply r = redis.run(eval_refund(algorithm::sliding_log, key, p, cost, now));
        const std::int64_t given = core::refund(m.state, now, p, cost);
        const auto got = ints_of(r);
        ASSERT_TRUE(got && *got == as_ints(m.decide(now, p, 0)))
            << what.str() << " refund " << cost << ": " << (got ? to_string(*got) : r.str);
        ASSERT_EQ(r.elements.at(5).integer, given) << what.str() << " refund " << cost;
        const auto& s = std::get<core::sliding_log_state>(m.state);
        ASSERT_EQ(members_in(redis, key, now - w), members_of(s, now - w))
            << what.str() << " refund " << cost;
        cut_entries += !members_of(s, now - w).empty();
        written_at = now;
        expiry = std::max<std::int64_t>(0, core::expiry(m.state, now, p));
      } else {
        const std::int64_t cost = uniform(rng, 1, 12);
        const decision d = m.decide(now, p, cost);
        if (d.allowed) {
          m.commit(now, p, cost);
          written_at = now;
          expiry = core::expiry(m.state, now, p);
        }
        const auto got =
            ints_of(redis.run(script_client::eval(algorithm::sliding_log, key, p, cost, now)));
        ASSERT_TRUE(got && *got == as_ints(d)) << what.str() << " check " << cost;
      }
    }
  }
  EXPECT_GT(cut_entries, 100) << "refunds that left part of the log";
}

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
  // An idempotency marker comes with its ms, and the ms must be a positive integer.
  auto keyed = [&](std::string ms) {
    return std::vector<std::string>{"EVALSHA", sha,    "2", "k", "k:rf:x", "gcra",
                                    "5",       "1000", "5", "1", "",       ms};
  };
  EXPECT_NE(redis.run({"EVALSHA", sha, "2", "k", "k:rf:x", "gcra", "5", "1000", "5", "1", ""})
                .str.find("2 keys and 7"),
            std::string::npos);
  EXPECT_NE(redis.run(keyed("0")).str.find("marker's ms"), std::string::npos);
  EXPECT_NE(redis.run(keyed("1.5")).str.find("marker's ms"), std::string::npos);
  EXPECT_EQ(redis.run({"EXISTS", "k", "k:rf:x"}).integer, 0);
  EXPECT_EQ(ints_of(redis.run(keyed("60000"))).value()[0], 1) << "a valid keyed refund peeks";
  EXPECT_GT(redis.run({"PTTL", "k:rf:x"}).integer, 59'000);
  EXPECT_EQ(redis.run({"EXISTS", "k"}).integer, 0);
}

// The refund script answers what it gave back after the peek's five integers, then whether it
// was a replay under its marker (then the first refund's amount, nothing given back now):
// before, only the peek, so a refund of a key that consumed nothing looked like any other.
TEST(refund_script, answers_what_it_gave_back_and_whether_it_was_a_replay) {
  redis_server server;
  script_client redis{server.port()};
  redis.run({"SCRIPT", "LOAD", std::string(redis::refund_script().source)});
  for (const algorithm a : {algorithm::sliding_log, algorithm::sliding_window,
                            algorithm::fixed_window, algorithm::token_bucket, algorithm::gcra}) {
    const core::params p{5, 60'000, 5};
    const std::string key = "g:" + std::string(to_string(a)) + ":{k}";
    const std::int64_t now = start_ms;
    auto tail = [&](const reply& r) {
      return r.elements.size() == 7 ? std::pair{r.elements[5].integer, r.elements[6].integer}
                                    : std::pair<long long, long long>{-1, -1};
    };
    EXPECT_EQ(tail(redis.run(eval_refund(a, key, p, 2, now))), std::pair(0LL, 0LL))
        << to_string(a) << ": a key that consumed nothing";
    redis.run(script_client::eval(a, key, p, 3, now));
    EXPECT_EQ(tail(redis.run(eval_refund(a, key, p, 2, now))), std::pair(2LL, 0LL)) << to_string(a);
    auto keyed = eval_refund(a, key, p, 4, now);
    keyed[2] = "2";
    keyed.insert(keyed.begin() + 4, key + ":rf:x");
    keyed.push_back("60000");
    EXPECT_EQ(tail(redis.run(keyed)), std::pair(1LL, 0LL)) << to_string(a) << ": 1 was left";
    EXPECT_EQ(tail(redis.run(keyed)), std::pair(1LL, 1LL)) << to_string(a) << ": the replay";
    EXPECT_EQ(ints_of(redis.run(keyed)).value()[2], 5) << to_string(a) << ": nothing more";
  }
}

}  // namespace
}  // namespace floodgate::test
