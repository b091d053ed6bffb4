// Hot keys: the space-saving sketch on known streams (exact, with evictions, and a zipf stream
// against exact counts within the documented bound), its sliding generations, and /v1/top.
#include "telemetry/hot_keys.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <cmath>
#include <map>
#include <random>

#include "admin/admin.hpp"
#include "telemetry/space_saving.hpp"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;

TEST(space_saving, exact_while_the_keys_fit) {
  space_saving s(4);
  for (const char* k : {"a", "b", "a", "c", "a", "b"}) s.add(k);
  const auto top = s.top(10);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key, "a");
  EXPECT_EQ(top[0].count, 3u);
  EXPECT_EQ(top[1].key, "b");
  EXPECT_EQ(top[1].count, 2u);
  EXPECT_EQ(top[2].key, "c");
  for (const auto& e : top) EXPECT_EQ(e.error, 0u);
  EXPECT_EQ(s.total(), 6u);
  EXPECT_EQ(s.min_count(), 0u);  // not full: an absent key never occurred
}

TEST(space_saving, a_new_key_takes_the_smallest_counter_and_its_count_as_error) {
  space_saving s(2);
  for (const char* k : {"a", "a", "b", "c"}) s.add(k);
  // c replaced b (count 1): c = 1 + 1 with error 1.
  const auto top = s.top(2);
  EXPECT_EQ(top[0].key, "a");
  EXPECT_EQ(top[0].count, 2u);
  EXPECT_EQ(top[0].error, 0u);
  EXPECT_EQ(top[1].key, "c");
  EXPECT_EQ(top[1].count, 2u);
  EXPECT_EQ(top[1].error, 1u);
  bool found = true;
  EXPECT_EQ(s.count_of("b", &found), 0u);
  EXPECT_FALSE(found);
  EXPECT_EQ(s.min_count(), 2u);
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.total(), 0u);
  s.add("b");
  EXPECT_EQ(s.count_of("b"), 1u);
}

// The smallest counter is found without a scan (a heap): after every addition of a random key
// with a random weight it is the smallest of all, and the one a new key replaces.
TEST(space_saving, a_new_key_always_replaces_the_smallest_counter) {
  constexpr std::size_t capacity = 16;
  space_saving s(capacity);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const auto key = "k" + std::to_string(rng() % 64);
    bool counted = false;
    s.count_of(key, &counted);
    const auto before = s.top(capacity);
    const auto smallest = before.empty() ? 0 : before.back().count;
    const auto weight = 1 + rng() % 5;
    s.add(key, weight);
    if (!counted && before.size() == capacity) {
      // Replaced a counter holding the smallest count: it starts there, with that error.
      bool now = false;
      EXPECT_EQ(s.count_of(key, &now), smallest + weight);
      ASSERT_TRUE(now);
    }
    const auto after = s.top(capacity);
    if (after.size() == capacity) {
      ASSERT_EQ(s.min_count(), after.back().count) << i;
    }
  }
}

// 200,000 draws over 20,000 keys with zipf(1.1) frequencies, into 64 counters: every entry
// brackets the true count (count - error <= true <= count), every error is at most N / 64, and
// every key more frequent than N / 64 is listed. The sketch never holds more than 64 keys.
TEST(space_saving, zipf_stream_within_the_bound_in_fixed_memory) {
  constexpr std::size_t keys = 20000, draws = 200000, capacity = 64;
  std::vector<double> weights(keys);
  for (std::size_t i = 0; i < keys; ++i) weights[i] = 1.0 / std::pow(double(i + 1), 1.1);
  std::discrete_distribution<std::size_t> zipf(weights.begin(), weights.end());
  std::mt19937_64 rng(42);
  space_saving s(capacity);
  std::map<std::string, std::uint64_t> exact;
  for (std::size_t i = 0; i < draws; ++i) {
    const auto key = "user-" + std::to_string(zipf(rng));
    s.add(key);
    ++exact[key];
    ASSERT_LE(s.size(), capacity);
  }
  const std::uint64_t bound = draws / capacity;
  const auto top = s.top(capacity);
  ASSERT_EQ(top.size(), capacity);
  for (const auto& e : top) {
    const auto truth = exact[e.key];
    EXPECT_LE(e.count - e.error, truth) << e.key;
    EXPECT_GE(e.count, truth) << e.key;
    EXPECT_LE(e.error, bound) << e.key;
    bool found = false;
    EXPECT_EQ(s.count_of(e.key, &found), e.count);
    EXPECT_TRUE(found);
  }
  std::size_t heavy = 0;
  for (const auto& [key, n] : exact)
    if (n > bound) {
      ++heavy;
      bool found = false;
      s.count_of(key, &found);
      EXPECT_TRUE(found) << key << " occurred " << n << " times";
    }
  EXPECT_GE(heavy, 5u);  // the test means something: zipf(1.1) has several keys above N / 64
  EXPECT_EQ(top[0].key, "user-0");
}

TEST(hot_keys, two_generations_slide) {
  hot_keys h({.capacity = 8, .interval = 10s});
  const auto t0 = hot_keys::clock::now();
  for (int i = 0; i < 5; ++i) h.record("api", "alice", false, t0);
  h.record("api", "bob", true, t0 + 1s);
  // Next interval: the first one is still reported.
  h.record("api", "alice", true, t0 + 12s);
  auto r = h.report("api", 10, t0 + 13s);
  EXPECT_EQ(r.span, 13s);
  EXPECT_EQ(r.checks, 7u);
  EXPECT_EQ(r.denials, 2u);
  ASSERT_EQ(r.checked.size(), 2u);
  EXPECT_EQ(r.checked[0].key, "alice");
  EXPECT_EQ(r.checked[0].count, 6u);
  EXPECT_EQ(r.checked[0].error, 0u);
  ASSERT_EQ(r.denied.size(), 2u);
  // Two intervals on, the first generation is gone.
  r = h.report("api", 10, t0 + 21s);
  EXPECT_EQ(r.checks, 1u);
  ASSERT_EQ(r.checked.size(), 1u);
  EXPECT_EQ(r.checked[0].count, 1u);
  // Idle for long: nothing left.
  EXPECT_EQ(h.report("api", 10, t0 + 60s).checks, 0u);
  EXPECT_EQ(h.report("other", 10, t0).checks, 0u);
}

// A key counted in one generation and absent from the other, full one: the other's smallest
// count is added to both its count and its error (it may have occurred that often there).
TEST(hot_keys, merging_a_full_generation_widens_the_error) {
  hot_keys h({.capacity = 3, .interval = 10s});
  const auto t0 = hot_keys::clock::now();
  // The older generation fills its 3 counters (smallest count 2); the newer one does not.
  for (const char* k : {"a", "a", "a", "b", "b", "d", "d"}) h.record("api", k, false, t0);
  for (const char* k : {"c", "a"}) h.record("api", k, false, t0 + 11s);
  const auto r = h.report("api", 10, t0 + 11s);
  ASSERT_EQ(r.checked.size(), 4u);
  EXPECT_EQ(r.checked[0].key, "a");
  EXPECT_EQ(r.checked[0].count, 4u);
  EXPECT_EQ(r.checked[0].error, 0u);
  EXPECT_EQ(r.checked[1].key, "c");  // 1 now, and at most 2 (the full gen's smallest) before
  EXPECT_EQ(r.checked[1].count, 3u);
  EXPECT_EQ(r.checked[1].error, 2u);
  EXPECT_EQ(r.checked[2].key, "b");  // 2 before; the newer gen is not full: exactly 0 there
  EXPECT_EQ(r.checked[2].count, 2u);
  EXPECT_EQ(r.checked[2].error, 0u);
}

// The response of an admin request answered at once (all but /v1/inspect and /v1/reset).
http_response admin_answer(const http_request& req, const admin_sources& s) {
  return std::get<http_response>(route_admin(req, s));
}

TEST(hot_keys, top_endpoint) {
  metrics m;
  config_store store(std::make_shared<const config>(
      parse_config("rules:\n  - {name: api, algorithm: gcra, limit: 1, window: 1s}\n", "r.yaml")));
  admin_sources off{&m, {}, nullptr, &store};
  http_request req{"GET", "/v1/top?rule=api", {}, {}, "127.0.0.1"};
  EXPECT_EQ(admin_answer(req, off).status, 404);

  hot_keys h({.capacity = 4, .interval = 60s});
  for (int i = 0; i < 3; ++i) h.record("api", "alice", i > 0, hot_keys::clock::now());
  h.record("api", "bob", false, hot_keys::clock::now());
  admin_sources on{&m, {}, &h, &store};
  auto res = admin_answer(req, on);
  ASSERT_EQ(res.status, 200) << res.body;
  const auto o = boost::json::parse(res.body).as_object();
  EXPECT_EQ(o.at("rule"), "api");
  EXPECT_EQ(o.at("checks"), 4);
  EXPECT_EQ(o.at("denials"), 2);
  EXPECT_EQ(o.at("capacity"), 4);
  EXPECT_EQ(o.at("interval_ms"), 60000);
  const auto& checked = o.at("checked").as_array();
  ASSERT_EQ(checked.size(), 2u);
  EXPECT_EQ(checked[0].at("key"), "alice");
  EXPECT_EQ(checked[0].at("count"), 3);
  EXPECT_EQ(checked[0].at("error"), 0);
  EXPECT_EQ(o.at("denied").as_array().size(), 1u);

  req.target = "/v1/top?rule=api&n=1";
  EXPECT_EQ(boost::json::parse(admin_answer(req, on).body).at("checked").as_array().size(), 1u);
  req.target = "/v1/top?rule=api&n=5";  // beyond the capacity
  EXPECT_EQ(admin_answer(req, on).status, 400);
  req.target = "/v1/top";
  EXPECT_EQ(admin_answer(req, on).status, 400);
  req.target = "/v1/top?rule=nope";
  EXPECT_EQ(admin_answer(req, on).status, 404);
}

// The query as /v1/inspect reads it: bad percent-encoding said as such (was: "give the rule"),
// n percent-decoded like every query value (docs/service.md), and a concurrency rule refused:
// its acquires are never counted here, so an empty list would read as "no hot keys".
TEST(hot_keys, top_endpoint_reads_the_query_as_inspect_does) {
  metrics m;
  config_store store(std::make_shared<const config>(
      parse_config("rules:\n  - {name: api, algorithm: gcra, limit: 1, window: 1s}\n"
                   "  - {name: jobs, algorithm: concurrency, limit: 2, lease: 10s}\n",
                   "r.yaml")));
  hot_keys h({.capacity = 4, .interval = 60s});
  for (const char* k : {"alice", "bob", "carol"}) h.record("api", k, false, hot_keys::clock::now());
  admin_sources on{&m, {}, &h, &store};
  http_request req{"GET", "/v1/top?rule=%zz", {}, {}, "127.0.0.1"};
  auto res = admin_answer(req, on);
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("bad percent-encoding"), std::string::npos) << res.body;

  req.target = "/v1/top?rule=%61pi&n=%32";
  res = admin_answer(req, on);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(boost::json::parse(res.body).at("checked").as_array().size(), 2u);
  req.target = "/v1/top?rule=api&n=%zz";
  res = admin_answer(req, on);
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("bad percent-encoding"), std::string::npos) << res.body;

  req.target = "/v1/top?rule=jobs";
  res = admin_answer(req, on);
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("concurrency"), std::string::npos) << res.body;
}

// A key from a header may hold any byte (obs-text): listed raw, it made the answer invalid
// JSON (RFC 8259: UTF-8), which a strict client refuses whole. Invalid bytes show as U+FFFD.
TEST(hot_keys, top_endpoint_answers_valid_utf8_whatever_the_keys) {
  metrics m;
  config_store store(std::make_shared<const config>(
      parse_config("rules:\n  - {name: api, algorithm: gcra, limit: 1, window: 1s}\n", "r.yaml")));
  hot_keys h({.capacity = 4, .interval = 60s});
  h.record("api", "caf\xc3\xa9", false, hot_keys::clock::now());
  h.record("api", "bad\xff", true, hot_keys::clock::now());
  admin_sources on{&m, {}, &h, &store};
  const auto res = admin_answer({"GET", "/v1/top?rule=api", {}, {}, "127.0.0.1"}, on);
  ASSERT_EQ(res.status, 200) << res.body;
  boost::system::error_code ec;
  const auto v = boost::json::parse(res.body, ec);  // validates UTF-8
  ASSERT_FALSE(ec) << ec.message() << ": " << res.body;
  const auto& checked = v.at("checked").as_array();
  ASSERT_EQ(checked.size(), 2u);
  std::vector<std::string> keys;
  for (const auto& e : checked) keys.emplace_back(e.at("key").as_string());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys[0], "bad\xEF\xBF\xBD");
  EXPECT_EQ(keys[1], "caf\xc3\xa9");
  EXPECT_EQ(v.at("denied").at(0).at("key").as_string(), "bad\xEF\xBF\xBD");
}

}  // namespace
}  // namespace floodgate::service
