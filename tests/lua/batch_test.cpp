// The batch script (lua/batch.lua) against the C++ step functions: a call deciding n items
// must answer, item by item, what n single calls in that order would, with repeated keys
// seeing the writes of the items before them; a refused item answers its own error and the
// others still count.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "redis/scripts.hpp"
#include "script_client.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t start_ms = 1'800'000'000'000;

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

struct batch_item {
  algorithm algo;
  std::string key;
  core::params p;
  std::string cost;
};

std::vector<std::string> eval_batch(const std::vector<batch_item>& items, const std::string& now) {
  std::vector<std::string> out = {"EVALSHA", std::string(redis::batch_script().sha1),
                                  str(static_cast<std::int64_t>(items.size()))};
  for (const auto& i : items) out.push_back(i.key);
  out.push_back(now);
  for (const auto& i : items) {
    out.push_back(std::string(to_string(i.algo)));
    out.insert(out.end(), {str(i.p.limit), str(i.p.window), str(i.p.burst), i.cost});
  }
  return out;
}

class batch : public ::testing::Test {
 protected:
  batch() {
    const reply r = redis_.run({"SCRIPT", "LOAD", std::string(redis::batch_script().source)});
    if (r.kind != reply::string || r.str != redis::batch_script().sha1)
      throw std::runtime_error("SCRIPT LOAD of the batch script gave '" + r.str + "'");
  }

  redis_server server_;
  script_client redis_{server_.port()};
};

constexpr std::array<algorithm, 5> all_algorithms = {
    algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
    algorithm::token_bucket, algorithm::gcra};

// 60 sequences of 40 calls, each call 1-48 items over 5 policies (one per algorithm) and 3
// keys each, so most calls hold several items on one key; the clock moves between calls.
TEST_F(batch, lua_matches_cpp_item_by_item) {
  long allowed = 0, denied = 0, repeated = 0;
  for (std::uint64_t seq = 0; seq < 60; ++seq) {
    std::mt19937_64 rng(seq * 104729 + 17);
    std::vector<core::params> policies;
    for (algorithm a : all_algorithms) {
      const std::int64_t l = uniform(rng, 1, 12);
      policies.push_back({l, uniform(rng, 60'000, 150'000),
                          takes_burst(a) ? uniform(rng, 1, 16) : l});
    }
    std::map<std::string, model_key> models;
    std::int64_t now = start_ms + uniform(rng, 0, 1'000'000);
    for (int call = 0; call < 40; ++call) {
      now += uniform(rng, 0, 20'000);
      std::vector<batch_item> items;
      std::vector<ints5> expected;
      std::map<std::string, int> seen;
      const auto n = uniform(rng, 1, 48);
      for (std::int64_t i = 0; i < n; ++i) {
        const auto ai = static_cast<std::size_t>(uniform(rng, 0, 4));
        const algorithm a = all_algorithms[ai];
        const core::params& p = policies[ai];
        const std::string key = "b" + str(static_cast<std::int64_t>(seq)) + ":" +
                                std::string(to_string(a)) + ":{k" + str(uniform(rng, 0, 2)) + "}";
        const std::int64_t cost = uniform(rng, 0, 9) == 0 ? 0 : uniform(rng, 1, 3);
        model_key& m = models.try_emplace(key, a).first->second;
        const decision d = m.decide(now, p, cost);
        if (d.allowed && cost > 0) m.commit(now, p, cost);
        (d.allowed ? allowed : denied) += 1;
        if (seen[key]++ > 0) ++repeated;
        expected.push_back(as_ints(d));
        items.push_back({a, key, p, str(cost)});
      }
      const reply r = redis_.run(eval_batch(items, str(now)));
      ASSERT_EQ(r.kind, reply::array) << "seq " << seq << " call " << call << ": " << r.str;
      ASSERT_EQ(r.elements.size(), 5 * items.size());
      for (std::size_t i = 0; i < items.size(); ++i) {
        const auto got = ints_of(r, i);
        ASSERT_TRUE(got) << "seq " << seq << " call " << call << " item " << i;
        ASSERT_EQ(*got, expected[i])
            << "seq " << seq << " call " << call << " item " << i << " (" << items[i].key
            << " cost " << items[i].cost << "): lua " << to_string(*got) << " vs C++ "
            << to_string(expected[i]);
      }
    }
    // What the last write of each key told Redis: its state's expiry, counted from that
    // write's now, which is at most the last call's (real time passes too, a little).
    for (const auto& [key, m] : models) {
      if (!m.written) continue;
      const reply ttl = redis_.run({"PTTL", key});
      const std::int64_t left = m.written_at + m.expiry - now;
      if (left <= 0) continue;
      EXPECT_LE(ttl.integer, m.expiry) << key;
      EXPECT_GE(ttl.integer, left - 1'000) << key;
    }
  }
  EXPECT_GT(allowed, 0);
  EXPECT_GT(denied, 0);
  EXPECT_GT(repeated, 1000);  // items on a key already in the call: the ordering case
}

// A refused item answers its own error in its first element; the items around it are decided
// and written as usual.
TEST_F(batch, refused_item_fails_alone) {
  const core::params p{2, 60'000, 2};
  std::vector<batch_item> items = {{algorithm::fixed_window, "r:{a}", p, "1"},
                                   {algorithm::fixed_window, "r:{a}", {0, 60'000, 0}, "1"},
                                   {algorithm::fixed_window, "r:{a}", p, "1"},
                                   {algorithm::fixed_window, "r:{a}", p, "1"}};
  const reply r = redis_.run(eval_batch(items, str(start_ms)));
  ASSERT_EQ(r.kind, reply::array) << r.str;
  ASSERT_EQ(r.elements.size(), 20u);
  EXPECT_EQ(ints_of(r, 0), (ints5{1, 2, 1, 60'000, 0}));
  ASSERT_EQ(r.elements[5].kind, reply::error);
  EXPECT_EQ(r.elements[5].str.rfind("ERR floodgate: item 2 limit must be", 0), 0u)
      << r.elements[5].str;
  EXPECT_EQ(ints_of(r, 2), (ints5{1, 2, 0, 60'000, 0}));
  EXPECT_EQ(ints_of(r, 3), (ints5{0, 2, 0, 60'000, 60'000}));

  items[1] = {algorithm::gcra, "r:{b}", p, "1"};
  const reply bad = redis_.run([&] {
    auto args = eval_batch(items, str(start_ms));
    args[3 + 4 + 1 + 5] = "leaky_bucket";  // item 2's algorithm
    return args;
  }());
  ASSERT_EQ(bad.kind, reply::array) << bad.str;
  ASSERT_EQ(bad.elements[5].kind, reply::error);
  EXPECT_NE(bad.elements[5].str.find("item 2 algorithm must be"), std::string::npos);
  EXPECT_EQ(redis_.run({"EXISTS", "r:{b}"}).integer, 0);
}

// An item whose key holds another type (WRONGTYPE from Redis inside the script) fails alone:
// the items before it have written, so the call goes on and they keep their answers.
TEST_F(batch, an_item_on_a_foreign_key_fails_alone) {
  const core::params p{5, 60'000, 5};
  ASSERT_EQ(redis_.run({"LPUSH", "f:{b}", "x"}).integer, 1);
  for (algorithm a : all_algorithms) {
    const std::string ok_key = "f:{" + std::string(to_string(a)) + "}";
    std::vector<batch_item> items = {
        {a, ok_key, p, "1"}, {a, "f:{b}", p, "1"}, {a, ok_key, p, "1"}};
    const reply r = redis_.run(eval_batch(items, str(start_ms)));
    ASSERT_EQ(r.kind, reply::array) << to_string(a) << ": " << r.str;
    ASSERT_EQ(r.elements.size(), 15u);
    EXPECT_EQ(ints_of(r, 0).value_or(ints5{})[2], 4) << to_string(a);
    ASSERT_EQ(r.elements[5].kind, reply::error) << to_string(a);
    EXPECT_EQ(r.elements[5].str.rfind("WRONGTYPE", 0), 0u) << r.elements[5].str;
    EXPECT_EQ(ints_of(r, 2).value_or(ints5{})[2], 3) << to_string(a);
  }
}

// A call that is malformed as a whole is refused whole, with nothing written.
TEST_F(batch, malformed_call_is_refused) {
  auto args = eval_batch({{algorithm::gcra, "m:{a}", {5, 1000, 5}, "1"}}, "");
  args.pop_back();
  const reply r = redis_.run(args);
  ASSERT_EQ(r.kind, reply::error);
  EXPECT_NE(r.str.find("batch takes n >= 1 keys and 1 + 5n arguments"), std::string::npos) << r.str;
  EXPECT_EQ(redis_.run({"EXISTS", "m:{a}"}).integer, 0);

  const reply bad_now = redis_.run(eval_batch({{algorithm::gcra, "m:{a}", {5, 1000, 5}, "1"}}, "x"));
  ASSERT_EQ(bad_now.kind, reply::error);
  EXPECT_NE(bad_now.str.find("now_ms must be"), std::string::npos) << bad_now.str;
}

}  // namespace
}  // namespace floodgate::test
