// The batch script (lua/batch.lua) against the C++ step functions: a call deciding n items
// must answer, item by item, what n single calls in that order would, with repeated keys
// seeing the writes of the items before them; a refused item answers its own error and the
// others still count. Items go in runs of one policy and cost, and come back as two integers
// (allowed), three (denied) or an error, as src/redis/batch.cpp sends and reads them.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <variant>

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

bool same_run(const batch_item& a, const batch_item& b) {
  return a.algo == b.algo && a.p.limit == b.p.limit && a.p.window == b.p.window &&
         a.p.burst == b.p.burst && a.cost == b.cost;
}

// EVALSHA of the batch script, consecutive items of one policy and cost in one run.
std::vector<std::string> eval_batch(const std::vector<batch_item>& items, const std::string& now) {
  std::vector<std::string> out = {"EVALSHA", std::string(redis::batch_script().sha1),
                                  str(static_cast<std::int64_t>(items.size()))};
  for (const auto& i : items) out.push_back(i.key);
  out.push_back(now);
  for (std::size_t i = 0; i < items.size();) {
    std::size_t end = i + 1;
    while (end < items.size() && same_run(items[i], items[end])) ++end;
    const batch_item& it = items[i];
    out.push_back(std::string(to_string(it.algo)));
    out.insert(out.end(), {str(it.p.limit), str(it.p.window), str(it.p.burst), it.cost,
                           str(static_cast<std::int64_t>(end - i))});
    i = end;
  }
  return out;
}

// Each item's five integers (the limit being the item's capacity) or its error; fails the
// test when the reply does not hold exactly one answer per item.
using answer = std::variant<ints5, std::string>;
std::vector<answer> answers(const reply& r, const std::vector<batch_item>& items) {
  std::vector<answer> out;
  EXPECT_EQ(r.kind, reply::array) << r.str;
  std::size_t at = 0;
  const auto integer = [&](std::size_t i) {
    EXPECT_LT(i, r.elements.size());
    EXPECT_EQ(r.elements.at(i).kind, reply::number);
    return r.elements.at(i).integer;
  };
  for (const auto& item : items) {
    if (at < r.elements.size() && r.elements[at].kind == reply::error) {
      out.emplace_back(r.elements[at++].str);
      continue;
    }
    const long long first = integer(at), reset = integer(at + 1);
    if (first >= 0) {
      out.emplace_back(ints5{1, item.p.burst, first, reset, 0});
      at += 2;
    } else {
      out.emplace_back(ints5{0, item.p.burst, -1 - first, reset, integer(at + 2)});
      at += 3;
    }
  }
  EXPECT_EQ(at, r.elements.size()) << "elements left after the last item";
  return out;
}

ints5 ints(const answer& a) {
  return std::holds_alternative<ints5>(a) ? std::get<ints5>(a) : ints5{-9, -9, -9, -9, -9};
}
std::string error(const answer& a) {
  return std::holds_alternative<std::string>(a) ? std::get<std::string>(a) : "(no error)";
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
// Half the items keep the policy and cost of the one before, so runs of many items and runs
// of one alternate.
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
      std::size_t ai = 0;
      std::int64_t cost = 1;
      for (std::int64_t i = 0; i < n; ++i) {
        if (i == 0 || uniform(rng, 0, 1) == 0) {
          ai = static_cast<std::size_t>(uniform(rng, 0, 4));
          cost = uniform(rng, 0, 9) == 0 ? 0 : uniform(rng, 1, 3);
        }
        const algorithm a = all_algorithms[ai];
        const core::params& p = policies[ai];
        const std::string key = "b" + str(static_cast<std::int64_t>(seq)) + ":" +
                                std::string(to_string(a)) + ":{k" + str(uniform(rng, 0, 2)) + "}";
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
      const auto got = answers(r, items);
      ASSERT_EQ(got.size(), items.size());
      for (std::size_t i = 0; i < items.size(); ++i) {
        ASSERT_EQ(ints(got[i]), expected[i])
            << "seq " << seq << " call " << call << " item " << i << " (" << items[i].key
            << " cost " << items[i].cost << "): lua " << to_string(ints(got[i])) << " "
            << error(got[i]) << " vs C++ " << to_string(expected[i]);
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
  const auto got = answers(r, items);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(ints(got[0]), (ints5{1, 2, 1, 60'000, 0}));
  EXPECT_EQ(error(got[1]).rfind("ERR floodgate: items 2..2 limit must be", 0), 0u)
      << error(got[1]);
  EXPECT_EQ(ints(got[2]), (ints5{1, 2, 0, 60'000, 0}));
  EXPECT_EQ(ints(got[3]), (ints5{0, 2, 0, 60'000, 60'000}));

  // A refused run of several items: each of them answers the error.
  items = {{algorithm::gcra, "r:{c}", p, "2"},
           {algorithm::gcra, "r:{b}", p, "1"},
           {algorithm::gcra, "r:{b}", p, "1"},
           {algorithm::fixed_window, "r:{d}", p, "1"}};
  auto args = eval_batch(items, str(start_ms));
  ASSERT_EQ(args.size(), 3u + 4 + 1 + 6 + 6 + 6);
  args[3 + 4 + 1 + 6] = "leaky_bucket";  // the second run's algorithm
  const auto bad = answers(redis_.run(args), items);
  ASSERT_EQ(bad.size(), 4u);
  EXPECT_EQ(ints(bad[0]), (ints5{1, 2, 0, 60'000, 0}));  // gcra: one per 30 s, burst 2
  EXPECT_NE(error(bad[1]).find("items 2..3 algorithm must be"), std::string::npos) << error(bad[1]);
  EXPECT_EQ(error(bad[2]), error(bad[1]));
  EXPECT_EQ(ints(bad[3]), (ints5{1, 2, 1, 60'000, 0}));
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
    const auto got = answers(redis_.run(eval_batch(items, str(start_ms))), items);
    ASSERT_EQ(got.size(), 3u) << to_string(a);
    EXPECT_EQ(ints(got[0])[2], 4) << to_string(a);
    EXPECT_EQ(error(got[1]).rfind("WRONGTYPE", 0), 0u) << to_string(a) << ": " << error(got[1]);
    EXPECT_EQ(ints(got[2])[2], 3) << to_string(a);
    // Nor does an item that writes nothing (a peek, a cost above the burst) read the foreign
    // key as absent, and the foreign key is never overwritten.
    std::vector<batch_item> idle = {{a, "f:{b}", p, "0"}, {a, "f:{b}", p, "9"}};
    const auto not_written = answers(redis_.run(eval_batch(idle, str(start_ms))), idle);
    ASSERT_EQ(not_written.size(), 2u) << to_string(a);
    for (const auto& r : not_written)
      EXPECT_EQ(error(r).rfind("WRONGTYPE", 0), 0u) << to_string(a) << ": " << error(r);
    EXPECT_EQ(redis_.run({"TYPE", "f:{b}"}).str, "list") << to_string(a);
  }
}

// A call that is malformed as a whole is refused whole, with nothing written.
TEST_F(batch, malformed_call_is_refused) {
  auto args = eval_batch({{algorithm::gcra, "m:{a}", {5, 1000, 5}, "1"}}, "");
  args.pop_back();
  const reply r = redis_.run(args);
  ASSERT_EQ(r.kind, reply::error);
  EXPECT_NE(r.str.find("batch takes n >= 1 keys and 1 + 6 arguments a run"), std::string::npos)
      << r.str;
  EXPECT_EQ(redis_.run({"EXISTS", "m:{a}"}).integer, 0);

  // Run counts that do not add up to the keys, or are not positive integers.
  for (const char* count : {"2", "0", "-1", "1.0", "x"}) {
    auto miscounted = eval_batch({{algorithm::gcra, "m:{a}", {5, 1000, 5}, "1"}}, "");
    miscounted.back() = count;
    const reply c = redis_.run(miscounted);
    ASSERT_EQ(c.kind, reply::error) << count;
    EXPECT_NE(c.str.find("run counts must be positive and add up to 1"), std::string::npos)
        << c.str;
  }
  EXPECT_EQ(redis_.run({"EXISTS", "m:{a}"}).integer, 0);

  const reply bad_now = redis_.run(eval_batch({{algorithm::gcra, "m:{a}", {5, 1000, 5}, "1"}}, "x"));
  ASSERT_EQ(bad_now.kind, reply::error);
  EXPECT_NE(bad_now.str.find("now_ms must be"), std::string::npos) << bad_now.str;
}

}  // namespace
}  // namespace floodgate::test
