// The scripts' contract beyond the differential test: embedding, same-millisecond bursts,
// denials and bad arguments that write nothing, TTLs on every key, all-or-nothing.
#include <gtest/gtest.h>

#include <random>

#include "redis/key.hpp"
#include "redis/scripts.hpp"
#include "script_client.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t now_ms = 1'800'000'000'000;  // a multiple of every window used here

constexpr std::array<algorithm, 5> all_algorithms = {
    algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
    algorithm::token_bucket, algorithm::gcra};

// A policy whose capacity is 5 for every algorithm; the bucket ones refill 1 per second.
core::params policy_of(algorithm a) {
  return takes_burst(a) ? core::params{1, 1000, 5} : core::params{5, 60'000, 5};
}

class scripts : public ::testing::TestWithParam<algorithm> {
 protected:
  scripts() : redis_(server_.port()) {}

  ints5 check(const std::string& key, std::int64_t cost, std::int64_t now = now_ms) {
    const reply r = redis_.run(script_client::eval(algo(), key, policy_of(algo()), cost, now));
    const auto out = ints_of(r);
    EXPECT_TRUE(out) << "reply: " << r.str;
    return out.value_or(ints5{});
  }
  // The key's whole state, to compare before and after (empty when there is no key).
  std::string dump(const std::string& key) { return redis_.run({"DUMP", key}).str; }
  long long pttl(const std::string& key) { return redis_.run({"PTTL", key}).integer; }
  algorithm algo() const { return GetParam(); }

  redis_server server_;
  script_client redis_;
};

TEST(embedding, sources_are_shebang_scripts_named_after_their_algorithm) {
  for (auto a : all_algorithms) {
    const auto& s = redis::script_for(a);
    EXPECT_EQ(s.name, to_string(a));
    EXPECT_TRUE(s.source.starts_with("#!lua\n")) << s.name;
    EXPECT_EQ(s.sha1.size(), 40u);
  }
  EXPECT_EQ(redis::multi_script().name, "multi");
  EXPECT_TRUE(redis::multi_script().source.starts_with("#!lua\n"));
}

TEST(embedding, sha1_is_what_redis_computes) {
  redis_server server;
  script_client redis{server.port()};  // SCRIPT LOADs each and compares the SHA1s
  // Without the script cached, EVALSHA answers NOSCRIPT, and FCALL without the library
  // "Function not found": what the client reloads on.
  redis.run({"SCRIPT", "FLUSH"});
  redis.run({"FUNCTION", "FLUSH"});
  const reply r = redis.run(script_client::eval(algorithm::gcra, "k", {1, 1000, 1}, 1, now_ms));
  EXPECT_EQ(r.kind, reply::error);
  EXPECT_TRUE(r.str.starts_with("NOSCRIPT") || r.str == "ERR Function not found") << r.str;
}

// Many calls in one millisecond are many requests: exactly the capacity is admitted.
TEST_P(scripts, same_millisecond_burst_admits_exactly_the_capacity) {
  int admitted = 0;
  for (int i = 0; i < 50; ++i) admitted += static_cast<int>(check("burst", 1)[0]);
  EXPECT_EQ(admitted, 5);
  if (algo() == algorithm::sliding_log) {  // one member per millisecond
    EXPECT_EQ(redis_.run({"ZCARD", "burst"}).integer, 1);
  }
}

TEST(sliding_log, same_millisecond_burst_of_a_large_limit) {
  redis_server server;
  script_client redis{server.port()};
  const core::params p{1000, 1000, 1000};
  for (int i = 0; i < 1500; ++i)
    redis.append(script_client::eval(algorithm::sliding_log, "k", p, 1, now_ms));
  int admitted = 0;
  for (int i = 0; i < 1500; ++i) admitted += static_cast<int>(ints_of(redis.read())->at(0));
  EXPECT_EQ(admitted, 1000);
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 1);
  EXPECT_EQ(redis.run({"ZSCORE", "k", "1000:1000"}).str, std::to_string(now_ms));
}

TEST_P(scripts, denied_and_peeking_requests_write_nothing) {
  // On a fresh key: no key appears.
  EXPECT_EQ(check("fresh", 0)[0], 1);
  EXPECT_EQ(check("fresh", 6), (ints5{0, 5, 5, 0, -1}));
  EXPECT_EQ(redis_.run({"EXISTS", "fresh"}).integer, 0);

  // On a full key, half a window later: the state and its TTL stay as they were.
  EXPECT_EQ(check("full", 5)[0], 1);
  const std::int64_t later = now_ms + policy_of(algo()).window / 2;
  const std::string before = dump("full");
  const long long ttl_before = pttl("full");
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(check("full", 1, later)[0], 0);
  EXPECT_EQ(check("full", 6, later)[4], -1);
  EXPECT_EQ(check("full", 0, later)[0], 1);
  EXPECT_EQ(dump("full"), before);
  EXPECT_LE(pttl("full"), ttl_before);
}

// A denial must not even trim the aged-out entries.
TEST(sliding_log, denial_does_not_trim) {
  redis_server server;
  script_client redis{server.port()};
  const core::params p{3, 1000, 3};
  auto check = [&](std::int64_t cost, std::int64_t now) {
    return *ints_of(redis.run(script_client::eval(algorithm::sliding_log, "k", p, cost, now)));
  };
  EXPECT_EQ(check(2, now_ms)[0], 1);
  EXPECT_EQ(check(1, now_ms + 500)[0], 1);
  // At +1000 the first two have aged out: one live entry, room for 2.
  EXPECT_EQ(check(3, now_ms + 1000), (ints5{0, 3, 2, 500, 500}));
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 2);
  EXPECT_EQ(check(2, now_ms + 1000)[0], 1);
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 2);  // trimmed one, added one
}

TEST_P(scripts, bad_arguments_are_error_replies_and_write_nothing) {
  EXPECT_EQ(check("k", 1)[0], 1);
  const std::string before = dump("k");
  const core::params p = policy_of(algo());
  const std::string l = std::to_string(p.limit), w = std::to_string(p.window),
                    b = std::to_string(p.burst), now = std::to_string(now_ms);
  const std::vector<std::vector<std::string>> bad = {
      {l, w, b, "nan", now},
      {l, w, b, "-1", now},
      {l, w, b, "1e300", now},
      {l, w, b, "abc", now},
      {l, w, b, "1.5", now},
      {l, w, b, "inf", now},
      {l, w, b, "0x10", now},
      {l, w, b, " 1", now},
      {l, w, b, "", now},
      {l, w, b, "1000000000000001", now},
      {l, w, b, "99999999999999999999", now},
      {"0", w, b, "1", now},
      {"-5", w, b, "1", now},
      {"1.5", w, b, "1", now},
      {l, "0", b, "1", now},
      {l, "abc", b, "1", now},
      {l, w, "0", "1", now},
      {"1000000", "1000000001", b, "1", now},
      {l, "1000000000", "1000001", "1", now},
      {l, w, b, "1", "x"},
      {l, w, b, "1", "1.5"},
      {l, w, b, "1", "1e3"},
      {l, w, b, "1"},
      {l, w, b, "1", now, "extra"},
  };
  for (const auto& argv : bad) {
    for (const std::string key : {"k", "other"}) {
      const reply r = redis_.run(script_client::eval_raw(algo(), {key}, argv));
      std::string args;
      for (const auto& a : argv) args += "'" + a + "' ";
      EXPECT_EQ(r.kind, reply::error) << args;
      EXPECT_NE(r.str.find("floodgate"), std::string::npos) << args << "-> " << r.str;
    }
  }
  EXPECT_EQ(redis_.run(script_client::eval_raw(algo(), {}, {l, w, b, "1", now})).kind,
            reply::error);
  EXPECT_EQ(dump("k"), before);
  EXPECT_EQ(redis_.run({"DBSIZE"}).integer, 1);
}

TEST_P(scripts, redis_time_is_the_clock_without_a_test_clock) {
  // fixed_window's reset_after pins down the now it used: ws + W - now.
  auto time_ms = [&] {
    const reply t = redis_.run({"TIME"});
    return std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
  };
  const core::params p{5, 60'000, 5};
  const std::int64_t before = time_ms();
  const auto d =
      ints_of(redis_.run(script_client::eval(algorithm::fixed_window, "t", p, 1, std::nullopt)));
  const std::int64_t after = time_ms();
  ASSERT_TRUE(d);
  bool consistent = false;
  for (std::int64_t n = before; n <= after; ++n)
    consistent = consistent || (*d)[3] == core::window_start(n, p.window) + p.window - n;
  EXPECT_TRUE(consistent) << "reset_after " << (*d)[3] << " for TIME in " << before << ".."
                          << after;
  // And every algorithm runs on Redis's clock and sets a TTL.
  EXPECT_EQ(
      ints_of(redis_.run(script_client::eval(algo(), "u", policy_of(algo()), 1, std::nullopt)))
          ->at(0),
      1);
  EXPECT_GT(pttl("u"), 0);
}

// A lone check's reply as Redis sends it (lua/single.lua): one integer, remaining + (burst + 1)
// x reset_after, when allowed; the batch item's three integers when denied; its two when the
// one integer would not be exact (2^53 or more). (script_client reads every other lone reply
// through redis::lone_decision, as the backend does.)
TEST_P(scripts, a_lone_reply_is_one_integer_when_allowed) {
  const core::params p = policy_of(algo());
  model_key m{algo()};
  const decision d = m.decide(now_ms, p, 1);
  const reply allowed = redis_.run_raw(script_client::eval(algo(), "r", p, 1, now_ms));
  ASSERT_EQ(allowed.kind, reply::number) << allowed.str;
  EXPECT_EQ(allowed.integer, d.remaining + (p.burst + 1) * d.reset_after.count());
  const reply denied = redis_.run_raw(script_client::eval(algo(), "r", p, p.burst + 1, now_ms));
  ASSERT_EQ(denied.kind, reply::array) << denied.str;
  ASSERT_EQ(denied.elements.size(), 3u);
  m.commit(now_ms, p, 1);
  const decision never = m.decide(now_ms, p, p.burst + 1);
  EXPECT_EQ(denied.elements[0].integer, -1 - never.remaining);
  EXPECT_EQ(denied.elements[1].integer, never.reset_after.count());
  EXPECT_EQ(denied.elements[2].integer, -1);
}

// Under FCALL a lone check keeps the arguments it parsed (lua/prelude.lua: at most 1024, then
// it starts again): more distinct ones than that, and the first ones again, decide as fresh.
TEST(lone_reply, more_distinct_arguments_than_are_kept_decide_the_same) {
  redis_server server;
  script_client redis{server.port()};
  for (int round = 0; round < 2; ++round) {
    for (std::int64_t limit = 1; limit <= 1100; ++limit)
      redis.append(script_client::eval(algorithm::fixed_window,
                                       "m" + std::to_string(round) + ":" + std::to_string(limit),
                                       {limit, 60'000, limit}, 1, now_ms));
    for (std::int64_t limit = 1; limit <= 1100; ++limit) {
      const auto d = ints_of(redis.read());
      ASSERT_TRUE(d) << limit;
      EXPECT_EQ(*d, (ints5{1, limit, limit - 1, 60'000, 0})) << limit;
    }
  }
}

TEST(lone_reply, two_integers_when_one_would_not_be_exact) {
  redis_server server;
  script_client redis{server.port()};
  // A bucket written at 10^15 and peeked at -10^15: the refill waits for the clock to come
  // back (lag 2 x 10^15), so (burst + 1) x reset_after is far above 2^53.
  const core::params p{1, 1000, 5};
  redis.run(script_client::eval(algorithm::token_bucket, "b", p, 1, 1'000'000'000'000'000));
  const reply r = redis.run_raw(
      script_client::eval(algorithm::token_bucket, "b", p, 0, -1'000'000'000'000'000));
  ASSERT_EQ(r.kind, reply::array) << r.str;
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, 4);
  EXPECT_GT(r.elements[1].integer, 2'000'000'000'000'000);
  // And read back as the backend reads it.
  EXPECT_EQ(ints_of(redis.run(script_client::eval(algorithm::token_bucket, "b", p, 0,
                                                  -1'000'000'000'000'000)))
                ->at(2),
            4);
}

// A random workload on many keys, on Redis's clock and on test clocks (so also big clock steps
// both ways): afterwards no key is without a TTL.
TEST(ttl, every_key_written_has_one) {
  redis_server server;
  script_client redis{server.port()};
  std::mt19937_64 rng(7);
  std::int64_t now = now_ms;
  int sent = 0;
  for (int i = 0; i < 3000; ++i) {
    const algorithm a = all_algorithms[rng() % 5];
    const core::params p = policy_of(a);
    const std::string key = std::string(to_string(a)) + ":" + std::to_string(rng() % 40);
    now += static_cast<std::int64_t>(rng() % 300);
    const std::int64_t cost = static_cast<std::int64_t>(rng() % 7);
    if (rng() % 4 == 0) {
      redis.append(script_client::eval_multi({{a, key, p, cost}, {a, key + "b", p, 1}},
                                             rng() % 2 ? std::optional(now) : std::nullopt));
    } else {
      redis.append(
          script_client::eval(a, key, p, cost, rng() % 2 ? std::optional(now) : std::nullopt));
    }
    ++sent;
  }
  for (int i = 0; i < sent; ++i) ASSERT_EQ(redis.read().kind, reply::array);
  std::string cursor = "0";
  long long keys = 0;
  do {
    const reply r = redis.run({"SCAN", cursor, "COUNT", "100"});
    cursor = r.elements[0].str;
    for (const auto& k : r.elements[1].elements) {
      ++keys;
      // -2: expired since SCAN listed it (a fixed window can end any millisecond).
      EXPECT_NE(redis.run({"PTTL", k.str}).integer, -1) << k.str;
    }
  } while (cursor != "0");
  EXPECT_GT(keys, 100);
}

// docs/algorithms.md, "Redis representation": an O(1) algorithm's state is one string that
// Redis stores as a 64-bit integer while it has at most 19 digits, so a key of the default
// format with a 16-byte caller key takes at most 100 bytes (MEMORY USAGE, 88 here); wider
// values are still exact, as strings.
TEST(memory, o1_state_is_one_integer_of_at_most_100_bytes) {
  redis_server server;
  script_client redis{server.port()};
  // Typical policies: 100 per second, 7 per second, 1000 per minute. token_bucket's level is in
  // units of 1/W token, so it stays an integer only while burst x window < 10^5.
  const std::pair<algorithm, core::params> cases[] = {
      {algorithm::sliding_window, {100, 1000, 100}}, {algorithm::sliding_window, {7, 1000, 7}},
      {algorithm::sliding_window, {1000, 60'000, 1000}},
      {algorithm::fixed_window, {100, 1000, 100}},   {algorithm::fixed_window, {7, 1000, 7}},
      {algorithm::fixed_window, {1000, 60'000, 1000}},
      {algorithm::token_bucket, {100, 1000, 99}},    {algorithm::token_bucket, {7, 1000, 7}},
      {algorithm::token_bucket, {1, 1000, 50}},
      {algorithm::gcra, {100, 1000, 100}},           {algorithm::gcra, {7, 1000, 7}},
      {algorithm::gcra, {1000, 60'000, 1000}},
  };
  for (const auto& [a, p] : cases) {
    const policy pol{"api", a, p.limit, std::chrono::milliseconds(p.window),
                     takes_burst(a) ? std::optional(p.burst) : std::nullopt};
    const std::string key = redis::state_key({"floodgate:", 128}, pol, "0123456789abcdef");
    std::int64_t now = now_ms + 123;
    for (int i = 0; i < 3 * static_cast<int>(p.burst); ++i, now += 3) {
      const reply r = redis.run(script_client::eval(a, key, p, 1 + i % 3, now));
      ASSERT_TRUE(ints_of(r)) << r.str;
      if (redis.run({"EXISTS", key}).integer == 0) continue;
      const std::string what = key + " L=" + std::to_string(p.limit) + " W=" +
                               std::to_string(p.window) + " step " + std::to_string(i);
      EXPECT_EQ(redis.run({"OBJECT", "ENCODING", key}).str, "int") << what;
      EXPECT_LE(redis.run({"MEMORY", "USAGE", key, "SAMPLES", "0"}).integer, 100) << what;
    }
  }
}

// Members are '<total>:<cost>', one per millisecond that admitted something: the live count
// is the newest total less the total before the oldest live member.
TEST(sliding_log, members_carry_their_cost_and_the_running_total) {
  redis_server server;
  script_client redis{server.port()};
  const core::params p{10, 1000, 10};
  auto check = [&](std::int64_t cost, std::int64_t now) {
    return *ints_of(redis.run(script_client::eval(algorithm::sliding_log, "k", p, cost, now)));
  };
  EXPECT_EQ(check(2, now_ms)[2], 8);
  EXPECT_EQ(check(3, now_ms + 5)[2], 5);
  EXPECT_EQ(check(1, now_ms + 5)[2], 4);  // the same millisecond: the same member, grown
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 2);
  EXPECT_EQ(redis.run({"ZSCORE", "k", "2:2"}).str, std::to_string(now_ms));
  EXPECT_EQ(redis.run({"ZSCORE", "k", "6:4"}).str, std::to_string(now_ms + 5));
  // At +1000 the first has aged out: 4 live; a write trims it.
  EXPECT_EQ(check(6, now_ms + 1000)[2], 0);
  EXPECT_EQ(check(1, now_ms + 1000), (ints5{0, 10, 0, 1000, 5}));
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 2);
  EXPECT_EQ(redis.run({"ZSCORE", "k", "12:6"}).str, std::to_string(now_ms + 1000));
}

// After the clock steps back, an admission joins the newest member: the log stays in time
// order, and the units count from the newest time (never shorter than they would have).
TEST(sliding_log, clock_step_back_joins_the_newest_member) {
  redis_server server;
  script_client redis{server.port()};
  const core::params p{10, 1000, 10};
  auto check = [&](std::int64_t cost, std::int64_t now) {
    return *ints_of(redis.run(script_client::eval(algorithm::sliding_log, "k", p, cost, now)));
  };
  EXPECT_EQ(check(2, now_ms)[0], 1);
  EXPECT_EQ(check(2, now_ms + 5)[0], 1);
  EXPECT_EQ(check(3, now_ms), (ints5{1, 10, 3, 1005, 0}));
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 2);
  EXPECT_EQ(redis.run({"ZSCORE", "k", "7:5"}).str, std::to_string(now_ms + 5));
}

// A request of any cost is one member (before: one per unit, so a valid rule with a large
// limit let one request stall Redis for seconds).
TEST(sliding_log, a_large_cost_is_one_member) {
  redis_server server;
  script_client redis{server.port()};
  const core::params p{1'000'000'000'000, 1000, 1'000'000'000'000};
  const auto r = ints_of(
      redis.run(script_client::eval(algorithm::sliding_log, "k", p, 1'000'000'000'000, now_ms)));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (ints5{1, 1'000'000'000'000, 0, 1000, 0}));
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 1);
}

// Totals restart from the live members when they would pass 2^52, so they stay exact. (A log
// really gets there after ~4.5e15 admitted units: here it starts close.)
TEST(sliding_log, totals_are_renumbered_before_they_leave_the_exact_range) {
  redis_server server;
  script_client redis{server.port()};
  const core::params p{1'000'000, 10'000, 1'000'000};
  redis.run({"ZADD", "k", std::to_string(now_ms), "4503599627370000:100"});
  const auto r =
      ints_of(redis.run(script_client::eval(algorithm::sliding_log, "k", p, 1000, now_ms + 1)));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (ints5{1, 1'000'000, 998'900, 10'000, 0}));
  EXPECT_EQ(redis.run({"ZCARD", "k"}).integer, 2);
  EXPECT_EQ(redis.run({"ZSCORE", "k", "100:100"}).str, std::to_string(now_ms));
  EXPECT_EQ(redis.run({"ZSCORE", "k", "1100:1000"}).str, std::to_string(now_ms + 1));
}

INSTANTIATE_TEST_SUITE_P(lua, scripts, ::testing::ValuesIn(all_algorithms), algorithm_name);

TEST(multi, one_denied_item_writes_nothing_for_any) {
  redis_server server;
  script_client redis{server.port()};
  const core::params gp = policy_of(algorithm::gcra), sp = policy_of(algorithm::sliding_log);
  // Fill the sliding_log key, then ask for both: gcra alone would pass.
  ASSERT_EQ(ints_of(redis.run(script_client::eval(algorithm::sliding_log, "{u}:s", sp, 5, now_ms)))
                ->at(0),
            1);
  const std::string before = redis.run({"DUMP", "{u}:s"}).str;
  const reply r = redis.run(script_client::eval_multi(
      {{algorithm::gcra, "{u}:g", gp, 1}, {algorithm::sliding_log, "{u}:s", sp, 1}}, now_ms));
  ASSERT_EQ(r.elements.size(), 10u);
  EXPECT_EQ(*ints_of(r, 0), (ints5{1, 5, 4, 1000, 0}));
  EXPECT_EQ(*ints_of(r, 1), (ints5{0, 5, 0, 60'000, 60'000}));
  EXPECT_EQ(redis.run({"EXISTS", "{u}:g"}).integer, 0);
  EXPECT_EQ(redis.run({"DUMP", "{u}:s"}).str, before);
  // All allowed: all written.
  const reply ok = redis.run(script_client::eval_multi(
      {{algorithm::gcra, "{u}:g", gp, 1}, {algorithm::fixed_window, "{u}:f", sp, 2}}, now_ms));
  EXPECT_EQ(*ints_of(ok, 0), (ints5{1, 5, 4, 1000, 0}));
  EXPECT_EQ(*ints_of(ok, 1), (ints5{1, 5, 3, 60'000, 0}));
  EXPECT_GT(redis.run({"PTTL", "{u}:g"}).integer, 0);
  EXPECT_GT(redis.run({"PTTL", "{u}:f"}).integer, 0);
}

TEST(multi, bad_requests_are_error_replies_and_write_nothing) {
  redis_server server;
  script_client redis{server.port()};
  const std::string now = std::to_string(now_ms);
  const std::vector<std::string> good = {"gcra", "5", "1000", "5", "1"};
  auto argv = [&](std::vector<std::string> first, std::vector<std::string> second) {
    std::vector<std::string> out = {now};
    out.insert(out.end(), first.begin(), first.end());
    out.insert(out.end(), second.begin(), second.end());
    return out;
  };
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> bad = {
      {{"a", "b"}, argv(good, {"leaky", "5", "1000", "5", "1"})},   // unknown algorithm
      {{"a", "a"}, argv(good, good)},                               // duplicate key
      {{"a", "b"}, argv(good, {"gcra", "5", "1000", "5", "nan"})},  // bad cost in item 2
      {{"a", "b"}, argv(good, {"gcra", "0", "1000", "5", "1"})},    // bad limit in item 2
      {{"a", "b"}, argv(good, {"gcra", "5", "1000", "5"})},         // too few arguments
      {{"a"}, argv(good, {"x"})},                                   // too many
      {{}, {now}},                                                  // no items
      {{"a", "b"},
       [&] {
         auto v = argv(good, good);
         v[0] = "soon";
         return v;
       }()},  // now_ms
  };
  for (const auto& [keys, args] : bad) {
    const reply r = redis.run(script_client::eval_multi_raw(keys, args));
    EXPECT_EQ(r.kind, reply::error) << args.size();
    EXPECT_NE(r.str.find("floodgate"), std::string::npos) << r.str;
  }
  EXPECT_EQ(redis.run({"DBSIZE"}).integer, 0);
}

}  // namespace
}  // namespace floodgate::test
