// Reservations (lua/reserve.lua) against src/core/reserve.cpp: random sequences of checks and
// reserves on one key per algorithm, on the same injected clock, must grant the same units and
// leave the same decisions; a grant is min(wanted, what was left), and is recorded exactly as
// one admitted request of that cost (issue 27); both name the window the grant was recorded in
// and how long it may be spent.
#include "core/reserve.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "core/give_back.hpp"
#include "redis/scripts.hpp"
#include "script_client.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t start_ms = 1'800'000'000'000;
constexpr std::int64_t short_expiry_ms = 5'000;  // as differential_test.cpp

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

// Every integer of a reply (the reserve script answers seven), or nullopt.
std::optional<std::vector<long long>> all_ints(const reply& r) {
  if (r.kind != reply::array) return std::nullopt;
  std::vector<long long> out;
  for (const auto& e : r.elements) {
    if (e.kind != reply::number) return std::nullopt;
    out.push_back(e.integer);
  }
  return out;
}

std::string to_string(const std::vector<long long>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "}";
}

std::vector<std::string> eval_reserve(algorithm a, const std::string& key, const core::params& p,
                                      std::int64_t wanted, std::int64_t now) {
  return {"EVALSHA", std::string(redis::reserve_script().sha1), "1", key,
          std::string(to_string(a)), str(p.limit), str(p.window), str(p.burst), str(wanted),
          str(now)};
}

class reserve : public ::testing::TestWithParam<algorithm> {};

TEST_P(reserve, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  const algorithm a = GetParam();
  ASSERT_EQ(redis.run({"SCRIPT", "LOAD", std::string(redis::reserve_script().source)}).str,
            redis::reserve_script().sha1);
  long reserves = 0, granted = 0, partial = 0, none = 0;
  for (std::uint64_t seq = 0; seq < 60; ++seq) {
    std::mt19937_64 rng(seq * 37 + static_cast<std::uint64_t>(a));
    const std::int64_t limit = uniform(rng, 1, 20), w = uniform(rng, 60'000, 150'000);
    const core::params p{limit, w, takes_burst(a) ? uniform(rng, 1, 25) : limit};
    const std::string key = "v" + str(static_cast<std::int64_t>(seq)) + ":{k}";
    model_key m{a};
    std::int64_t now = start_ms + uniform(rng, 0, 10 * w);
    std::vector<std::pair<std::string, std::vector<long long>>> expected;
    for (int step = 0; step < 120; ++step) {
      const std::int64_t r = uniform(rng, 0, 99);
      now += r < 30 ? 0 : r < 85 ? uniform(rng, 1, w / 10) : uniform(rng, w / 10, 2 * w);
      if (m.written && m.expiry < short_expiry_ms) now = std::max(now, m.written_at + m.expiry);
      std::ostringstream what;
      what << to_string(a) << " L=" << p.limit << " W=" << p.window << " B=" << p.burst << " seq "
           << seq << " step " << step << " now " << now;
      if (uniform(rng, 0, 1) == 0) {  // a reservation, of more or less than is left
        const std::int64_t wanted = uniform(rng, 0, p.burst + 3);
        const std::int64_t left = m.decide(now, p, 0).remaining;
        auto copy = m.state;
        const core::grant g = core::reserve(copy, now, p, wanted);
        const std::int64_t grant = g.units;
        ASSERT_EQ(grant, std::min(wanted, left)) << what.str() << " wanted " << wanted;
        // The windows name the window the grant counts in and its end; the others their spend
        // span (a tenth of the refill time or of the window).
        const bool windowed = a == algorithm::fixed_window || a == algorithm::sliding_window;
        const std::int64_t span =
            a == algorithm::sliding_log ? p.window / 10 : p.burst * p.window / (10 * p.limit);
        ASSERT_EQ(g.window, windowed ? now / p.window : 0) << what.str();
        ASSERT_EQ(g.spend_within,
                  windowed ? p.window - now % p.window : std::max<std::int64_t>(1, span))
            << what.str();
        if (grant > 0) {
          ASSERT_TRUE(m.decide(now, p, grant).allowed) << what.str();
          if (a == algorithm::sliding_log) {
            // Admitted now, counted from the end of the spend span (until then plus W).
            core::commit_at(std::get<core::sliding_log_state>(m.state), now, p, grant,
                            now + g.spend_within);
            m.written = true;
            m.written_at = now;
            m.expiry = redis_expiry(m.state, now, p);
          } else {
            m.commit(now, p, grant);
          }
        }
        ASSERT_EQ(m.decide(now, p, 0), core::decide(copy, now, p, 0))
            << what.str() << ": core::reserve left another state than one check of " << grant;
        const decision after = m.decide(now, p, 0);
        const ints5 e = as_ints(after.remaining > 0 ? after : m.decide(now, p, 1));
        expected.emplace_back(what.str() + " reserve " + str(wanted),
                              std::vector<long long>{grant, g.window, g.spend_within, e[1], e[2],
                                                     e[3], e[4]});
        redis.append(eval_reserve(a, key, p, wanted, now));
        ++reserves;
        granted += grant;
        partial += grant > 0 && grant < wanted;
        none += grant == 0 && wanted > 0;
      } else {
        const std::int64_t cost = uniform(rng, 1, std::min<std::int64_t>(p.burst, 4));
        const decision d = m.decide(now, p, cost);
        if (d.allowed) m.commit(now, p, cost);
        const ints5 e = as_ints(d);
        expected.emplace_back(what.str() + " check " + str(cost),
                              std::vector<long long>(e.begin(), e.end()));
        redis.append(script_client::eval(a, key, p, cost, now));
      }
    }
    for (const auto& [what, e] : expected) {
      const reply got_reply = redis.read();
      const auto got = all_ints(got_reply);
      ASSERT_TRUE(got && *got == e) << what << "\n  lua " << (got ? to_string(*got) : got_reply.str)
                                    << " vs C++ " << to_string(e);
    }
  }
  std::cout << "[ stats    ] reserve " << to_string(a) << ": " << reserves << " reserves, "
            << granted << " units granted, " << partial << " partial, " << none << " nothing\n";
  EXPECT_GT(partial, 0) << "some reservations wanted more than was left";
  EXPECT_GT(none, 0) << "some found nothing left";
}

// A grant is recorded as admissions: after reserving everything, a check is denied, and what
// the grant took is what a refund (the give-back) returns.
TEST(reserve_script, a_full_grant_leaves_nothing_and_a_refund_gives_it_back) {
  redis_server server;
  script_client redis{server.port()};
  for (const auto* s : {&redis::reserve_script(), &redis::refund_script()})
    ASSERT_EQ(redis.run({"SCRIPT", "LOAD", std::string(s->source)}).str, s->sha1);
  const core::params p{10, 60'000, 10};
  const auto now = start_ms;
  const auto r = all_ints(redis.run(eval_reserve(algorithm::fixed_window, "g:{k}", p, 25, now)));
  ASSERT_TRUE(r && r->size() == 7);
  EXPECT_EQ((*r)[0], 10) << "min(25, 10)";
  EXPECT_EQ((*r)[1], now / 60'000) << "the window it counts in";
  EXPECT_EQ((*r)[2], 60'000 - now % 60'000) << "spent by that window's end";
  EXPECT_EQ((*r)[4], 0) << "nothing left";
  EXPECT_GT((*r)[6], 0) << "a unit comes back with the next window";
  const auto denied = ints_of(redis.run(script_client::eval(algorithm::fixed_window, "g:{k}", p, 1, now)));
  ASSERT_TRUE(denied);
  EXPECT_EQ((*denied)[0], 0);
  const auto back = ints_of(redis.run({"EVALSHA", std::string(redis::refund_script().sha1), "1",
                                       "g:{k}", "fixed_window", "10", "60000", "10", "4",
                                       str(now)}));
  ASSERT_TRUE(back);
  EXPECT_EQ((*back)[2], 4) << "four unspent units given back";
  const auto refused = redis.run(eval_reserve(algorithm::fixed_window, "g:{k}", p, -1, now));
  EXPECT_EQ(refused.kind, reply::error) << "a negative want is refused";
}

std::vector<std::string> eval_give_back(algorithm a, const std::string& key, const std::string& id,
                                        std::int64_t w, std::int64_t window, std::int64_t units,
                                        std::int64_t now) {
  return {"EVALSHA",
          std::string(redis::give_back_script().sha1),
          "2",
          key,
          key + ":gb:" + id,
          std::string(to_string(a)),
          str(w),
          str(window),
          str(units),
          str(now)};
}

// The give-back (lua/give_back.lua) against src/core/give_back.cpp: random checks, reserves
// and give-backs on one key of each window algorithm — naming the current window, the last or
// the next one, of more or fewer units than were reserved, under ids used before or new — must
// give back the same units and leave the same decisions. The test's own marker model: an id
// answers its first give-back's units (within the window it named).
TEST(give_back, lua_matches_cpp) {
  redis_server server;
  script_client redis{server.port()};
  for (const auto* s : {&redis::reserve_script(), &redis::give_back_script()})
    ASSERT_EQ(redis.run({"SCRIPT", "LOAD", std::string(s->source)}).str, s->sha1);
  long given_total = 0, replays = 0, other_window = 0;
  for (const algorithm a : {algorithm::fixed_window, algorithm::sliding_window}) {
    for (std::uint64_t seq = 0; seq < 40; ++seq) {
      std::mt19937_64 rng(seq * 53 + static_cast<std::uint64_t>(a));
      const std::int64_t limit = uniform(rng, 1, 30), w = uniform(rng, 60'000, 150'000);
      const core::params p{limit, w, limit};
      const std::string key = "gb" + str(static_cast<std::int64_t>(seq)) + ":{k}";
      model_key m{a};
      std::map<std::string, std::pair<std::int64_t, std::int64_t>> marks;  // id -> given, until
      std::int64_t now = start_ms + uniform(rng, 0, 10 * w);
      std::vector<std::pair<std::string, std::vector<long long>>> expected;
      for (int step = 0; step < 120; ++step) {
        const std::int64_t r = uniform(rng, 0, 99);
        now += r < 40 ? 0 : r < 90 ? uniform(rng, 1, w / 10) : uniform(rng, w / 2, 2 * w);
        if (m.written && m.expiry < short_expiry_ms) now = std::max(now, m.written_at + m.expiry);
        std::ostringstream what;
        what << to_string(a) << " L=" << limit << " W=" << w << " seq " << seq << " step " << step
             << " now " << now;
        const std::int64_t op = uniform(rng, 0, 2);
        if (op == 0) {
          const std::int64_t wanted = uniform(rng, 0, limit);
          auto copy = m.state;
          const core::grant g = core::reserve(copy, now, p, wanted);
          if (g.units > 0) m.commit(now, p, g.units);
          const decision after = m.decide(now, p, 0);
          const ints5 e = as_ints(after.remaining > 0 ? after : m.decide(now, p, 1));
          expected.emplace_back(
              what.str() + " reserve",
              std::vector<long long>{g.units, g.window, g.spend_within, e[1], e[2], e[3], e[4]});
          redis.append(eval_reserve(a, key, p, wanted, now));
        } else if (op == 1) {
          const std::int64_t current = now / w;
          const std::int64_t pick = uniform(rng, 0, 9);
          const std::int64_t window = pick < 7 ? current : pick < 9 ? current - 1 : current + 1;
          other_window += window != current;
          const std::int64_t units = uniform(rng, 1, limit + 2);
          // Ids are per window: a marker lives until its window ends on Redis's own clock,
          // which this test's injected clock does not move.
          const std::string id = "i" + str(uniform(rng, 0, 5)) + "w" + str(window);
          std::vector<long long> e{0, 0};
          if (window == current) {
            const auto mark = marks.find(id);
            if (mark != marks.end() && mark->second.second > now) {
              e = {mark->second.first, 1};
              ++replays;
            } else {
              // KEEPTTL: the key's expiry stays, as the model's.
              const std::int64_t given = core::give_back(m.state, now, p, window, units);
              marks[id] = {given, (window + 1) * w};
              e = {given, 0};
              given_total += given;
            }
          }
          if (window != current) {  // the step itself refuses it, as the script does
            ASSERT_EQ(core::give_back(m.state, now, p, window, units), 0)
                << what.str() << ": a give-back to window " << window << " returned units";
          }
          expected.emplace_back(
              what.str() + " give back " + str(units) + " to " + str(window) + " as " + id, e);
          redis.append(eval_give_back(a, key, id, w, window, units, now));
        } else {
          const std::int64_t cost = uniform(rng, 1, std::min<std::int64_t>(limit, 4));
          const decision d = m.decide(now, p, cost);
          if (d.allowed) m.commit(now, p, cost);
          const ints5 e = as_ints(d);
          expected.emplace_back(what.str() + " check " + str(cost),
                                std::vector<long long>(e.begin(), e.end()));
          redis.append(script_client::eval(a, key, p, cost, now));
        }
      }
      for (const auto& [what, e] : expected) {
        const reply got_reply = redis.read();
        const auto got = all_ints(got_reply);
        ASSERT_TRUE(got && *got == e)
            << what << "\n  lua " << (got ? to_string(*got) : got_reply.str) << " vs C++ "
            << to_string(e);
      }
    }
  }
  std::cout << "[ stats    ] give_back: " << given_total << " units given back, " << replays
            << " replays, " << other_window << " naming another window\n";
  EXPECT_GT(given_total, 0);
  EXPECT_GT(replays, 0);
  EXPECT_GT(other_window, 0);
}

// A give-back returns only into the window it names, at most what that window counts, once per
// id; the others' arguments are refused with a reason.
TEST(give_back_script, names_its_window_counts_once_and_never_returns_more) {
  redis_server server;
  script_client redis{server.port()};
  for (const auto* s : {&redis::reserve_script(), &redis::give_back_script()})
    ASSERT_EQ(redis.run({"SCRIPT", "LOAD", std::string(s->source)}).str, s->sha1);
  const core::params p{10, 60'000, 10};
  const auto a = algorithm::fixed_window;
  const std::int64_t now = start_ms - start_ms % 60'000 + 59'000, window = now / 60'000;
  const auto r = all_ints(redis.run(eval_reserve(a, "g:{k}", p, 6, now)));
  ASSERT_TRUE(r && (*r)[0] == 6);
  auto back = all_ints(redis.run(eval_give_back(a, "g:{k}", "x1", 60'000, window, 4, now)));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, (std::vector<long long>{4, 0}));
  back = all_ints(redis.run(eval_give_back(a, "g:{k}", "x1", 60'000, window, 4, now + 1)));
  EXPECT_EQ(*back, (std::vector<long long>{4, 1})) << "the same id again: a replay, nothing back";
  back = all_ints(redis.run(eval_give_back(a, "g:{k}", "x2", 60'000, window, 50, now + 2)));
  EXPECT_EQ(*back, (std::vector<long long>{2, 0})) << "never more than the window counts";
  // The next window: a reservation of it, then a give-back naming the last one returns nothing.
  const auto next = all_ints(redis.run(eval_reserve(a, "g:{k}", p, 5, now + 1'000)));
  ASSERT_TRUE(next && (*next)[0] == 5 && (*next)[1] == window + 1);
  back = all_ints(redis.run(eval_give_back(a, "g:{k}", "x3", 60'000, window, 5, now + 1'000)));
  EXPECT_EQ(*back, (std::vector<long long>{0, 0})) << "a past window gets nothing";
  const auto peek = ints_of(redis.run(script_client::eval(a, "g:{k}", p, 0, now + 1'000)));
  ASSERT_TRUE(peek);
  EXPECT_EQ((*peek)[2], 5) << "the new window still counts its 5";
  const auto refused = redis.run({"EVALSHA", std::string(redis::give_back_script().sha1), "2",
                                  "g:{k}", "g:{k}:gb:x", "gcra", "60000", "1", "1", ""});
  EXPECT_EQ(refused.kind, reply::error);
  EXPECT_NE(refused.str.find("fixed_window or sliding_window"), std::string::npos) << refused.str;
}

INSTANTIATE_TEST_SUITE_P(lua, reserve,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         algorithm_name);

}  // namespace
}  // namespace floodgate::test
