// floodgated on a real Redis Cluster (3 masters + 3 replicas): a group whose rules share the
// caller key is decided all-or-nothing on whichever master owns that key's slot; a group that
// cannot share a slot is refused when the file is loaded (here on SIGHUP; start-up is covered
// in process_test.cpp), and the rules in force stay. Concurrency limits, refunds and penalties
// over HTTP hold on every master. The Redis sampler answers for each seed.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <set>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_cluster.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr const char* rules = R"(rules:
  - {name: minute, algorithm: sliding_log, limit: 5, window: 1m, key: "header:X-User-Id"}
  - {name: day, algorithm: fixed_window, limit: 7, window: 24h, key: "header:x-user-id"}
  - {name: ip, algorithm: gcra, limit: 10, window: 1s}
groups:
  - {name: user, rules: [minute, day]}
)";

bool wait_ready(const floodgated_process& fg) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline;) {
    if (http_request_once(fg.port(), "GET", "/readyz").status == 200) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(floodgated_cluster, groups_share_a_slot_and_a_group_that_cannot_is_refused_at_load) {
  redis_cluster cluster;
  floodgated_process::options opts;
  opts.extra_args = {"--redis", cluster.url() + "?timeout=2s"};  // (deadlines: not tested here)
  floodgated_process fg(rules, opts);
  ASSERT_TRUE(wait_ready(fg)) << fg.log();
  http_connection c(fg.port());

  // Users whose keys live on at least two different masters.
  std::vector<std::string> users;
  std::set<int> masters;
  for (int i = 0; users.size() < 2 && i < 1000; ++i) {
    const std::string user = "user-" + std::to_string(i);
    if (masters.insert(cluster.master_of(cluster.slot_of(user))).second) users.push_back(user);
  }
  ASSERT_EQ(users.size(), 2u);

  for (const auto& user : users) {
    const std::vector<std::pair<std::string, std::string>> id = {{"X-User-Id", user}};
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(c.request("GET", "/v1/auth/user", {}, id).status, 204) << user << " #" << i;
    const auto denied = c.request("GET", "/v1/auth/user", {}, id);
    EXPECT_EQ(denied.status, 403) << denied.body;
    EXPECT_EQ(denied.header("RateLimit").value_or("").substr(0, 17), R"("minute";r=0;t=60)");
    // The denied check consumed nothing from `day`: 7 - 5 left, all-or-nothing on one master.
    const auto day =
        c.request("POST", "/v1/check", R"({"rule":"day","key":")" + user + R"(","cost":0})");
    EXPECT_EQ(json::parse(day.body).as_object()["remaining"].as_int64(), 2) << day.body;
  }

  // A per-request check over two caller keys on different masters cannot be one script.
  const auto cross = c.request("POST", "/v1/check",
                               R"({"rules":[{"rule":"ip","key":")" + users[0] +
                                   R"("},{"rule":"ip","key":")" + users[1] + R"("}]})");
  EXPECT_EQ(cross.status, 400) << cross.body;
  EXPECT_NE(cross.body.find("different Redis Cluster slots"), std::string::npos) << cross.body;

  // A reload that groups rules with different keys is refused; the old rules stay.
  const auto before = fg.log().size();
  fg.write_rules(std::string(rules) + "  - {name: login, rules: [minute, ip]}\n");
  fg.signal(SIGHUP);
  ASSERT_TRUE(fg.wait_for_log("reload rejected", 5s, before)) << fg.log();
  EXPECT_NE(fg.log().find(fg.rules_path() + ":7: group 'login': rules 'minute' (key "
                                            "header:X-User-Id) and 'ip' (key remote_addr)",
                          before),
            std::string::npos)
      << fg.log().substr(before);
  EXPECT_EQ(c.request("GET", "/v1/auth/login", {}, {{"X-User-Id", "new"}}).status, 404)
      << "the rejected file's group never came into force";
  EXPECT_EQ(c.request("GET", "/v1/auth/user", {}, {{"X-User-Id", "new"}}).status, 204);

  // The Redis sampler answers for each seed of the URL (sampled at start, then every 5 s;
  // 10 s allows a loaded machine).
  const std::string url = cluster.url();
  std::vector<std::string> seeds;
  for (auto rest = url.substr(url.find("//") + 2); !rest.empty();) {
    const auto end = std::min(rest.find_first_of(",?/"), rest.size());
    seeds.push_back(rest.substr(0, end));
    rest = end < rest.size() && rest[end] == ',' ? rest.substr(end + 1) : "";
  }
  ASSERT_FALSE(seeds.empty()) << url;
  auto all_up = [&](const std::string& text) {
    for (const auto& seed : seeds)
      if (text.find("floodgate_redis_up{node=\"" + seed + "\"} 1") == std::string::npos)
        return false;
    return true;
  };
  std::string metrics;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until && !all_up(metrics);
       std::this_thread::sleep_for(200ms))
    metrics = http_request_once(fg.port(), "GET", "/metrics").body;
  EXPECT_TRUE(all_up(metrics)) << url << "\n" << metrics;
}

// /v1/acquire, /v1/release, /v1/renew, /v1/refund and a block_for rule, for caller keys on each
// of the three masters: the state lives on the master that owns the key's slot, and each key
// behaves as on one Redis (tests/service/redis_test.cpp).
TEST(floodgated_cluster, leases_refunds_and_penalties_on_every_master) {
  redis_cluster cluster;
  floodgated_process::options opts;
  opts.extra_args = {"--redis", cluster.url() + "?timeout=2s"};  // (deadlines: not tested here)
  floodgated_process fg(R"(rules:
  - {name: exports, algorithm: concurrency, limit: 2, lease: 1h}
  - {name: upstream, algorithm: sliding_log, limit: 2, window: 1h}
  - {name: login, algorithm: fixed_window, limit: 1, window: 1s, block_for: 1h}
)",
                        opts);
  ASSERT_TRUE(wait_ready(fg)) << fg.log();
  http_connection c(fg.port());

  // One caller key per master.
  std::vector<std::string> keys;
  std::vector<int> owners;
  std::set<int> masters;
  for (int i = 0; keys.size() < 3 && i < 1000; ++i) {
    const std::string key = "tenant-" + std::to_string(i);
    const int m = cluster.master_of(cluster.slot_of(key));
    if (masters.insert(m).second) {
      keys.push_back(key);
      owners.push_back(m);
    }
  }
  ASSERT_EQ(keys.size(), 3u);

  auto body = [](std::string_view rule, const std::string& key, std::string_view extra = {}) {
    return R"({"rule":")" + std::string(rule) + R"(","key":")" + key + "\"" + std::string(extra) +
           "}";
  };
  auto object = [](const http_reply& r) { return json::parse(r.body).as_object(); };
  auto lease_of = [&](const http_reply& r) {
    return std::string(object(r).at("lease").as_string());
  };
  auto with_lease = [](const std::string& lease) { return R"(,"lease":")" + lease + "\""; };

  std::vector<std::string> held;  // a live lease of each key
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const auto& key = keys[k];
    SCOPED_TRACE(key + " on master " + std::to_string(owners[k]));
    // The limit held exactly, on the owning master.
    const auto a = c.request("POST", "/v1/acquire", body("exports", key));
    ASSERT_EQ(a.status, 200) << a.body;
    const auto b = c.request("POST", "/v1/acquire", body("exports", key));
    ASSERT_EQ(b.status, 200) << b.body;
    const auto full = c.request("POST", "/v1/acquire", body("exports", key));
    ASSERT_EQ(full.status, 429) << full.body;
    // Until the earliest lease expires: within the test's run (a minute, generously) of 1 h.
    EXPECT_GT(object(full).at("retry_after_ms").as_int64(), 3'540'000) << full.body;
    EXPECT_LE(object(full).at("retry_after_ms").as_int64(), 3'600'000) << full.body;
    EXPECT_EQ(cluster.command(owners[k], {"ZCARD", "floodgate:exports:cc:{" + key + "}"}).integer,
              2);
    // A foreign lease (another key's, live) frees nothing here.
    if (k > 0) {
      const auto foreign =
          c.request("POST", "/v1/release", body("exports", key, with_lease(held[k - 1])));
      ASSERT_EQ(foreign.status, 200) << foreign.body;
      EXPECT_FALSE(object(foreign).at("released").as_bool());
      EXPECT_EQ(c.request("POST", "/v1/acquire", body("exports", key)).status, 429);
    }
    // A release frees exactly one slot; releasing it again frees nothing.
    const auto release = body("exports", key, with_lease(lease_of(a)));
    const auto r1 = c.request("POST", "/v1/release", release);
    ASSERT_EQ(r1.status, 200) << r1.body;
    EXPECT_TRUE(object(r1).at("released").as_bool());
    EXPECT_FALSE(object(c.request("POST", "/v1/release", release)).at("released").as_bool());
    const auto again = c.request("POST", "/v1/acquire", body("exports", key));
    ASSERT_EQ(again.status, 200) << "the released slot: " << again.body;
    EXPECT_EQ(c.request("POST", "/v1/acquire", body("exports", key)).status, 429);
    const auto renew =
        c.request("POST", "/v1/renew", body("exports", key, with_lease(lease_of(b))));
    ASSERT_EQ(renew.status, 200) << renew.body;
    EXPECT_TRUE(object(renew).at("renewed").as_bool());
    held.push_back(lease_of(again));
    // The previous key's lease still holds its slot there (the foreign release freed nothing).
    if (k > 0) {
      EXPECT_EQ(
          cluster.command(owners[k - 1], {"ZCARD", "floodgate:exports:cc:{" + keys[k - 1] + "}"})
              .integer,
          2);
    }

    // A refund gives back what was consumed, never beyond the limit.
    const auto check = body("upstream", key);
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429);
    const auto refunded = c.request("POST", "/v1/refund", check);
    ASSERT_EQ(refunded.status, 200) << refunded.body;
    EXPECT_EQ(object(refunded).at("remaining").as_int64(), 1) << refunded.body;
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200) << "the refunded unit";
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c.request("POST", "/v1/refund", check).status, 200);
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
    EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429) << "refunds beyond the limit";

    // block_for: refused once, blocked for an hour, the block on the owning master.
    EXPECT_EQ(c.request("POST", "/v1/check", body("login", key)).status, 200);
    const auto refused = c.request("POST", "/v1/check", body("login", key));
    ASSERT_EQ(refused.status, 429) << refused.body;
    EXPECT_GT(object(refused).at("retry_after_ms").as_int64(), 3'599'000) << refused.body;
    EXPECT_LE(object(refused).at("retry_after_ms").as_int64(), 3'600'000) << refused.body;
    EXPECT_EQ(cluster.command(owners[k], {"EXISTS", "floodgate:login:bk:{" + key + "}"}).integer,
              1);
  }

  // The 1 s window admits again after 1.1 s (local denials last at most 1 s); the blocks not,
  // and retry_after still says when each block ends: 1 h from its start, 1.1 s to a minute ago.
  std::this_thread::sleep_for(1100ms);
  for (const auto& key : keys) {
    const auto still = c.request("POST", "/v1/check", body("login", key));
    ASSERT_EQ(still.status, 429) << key << ": " << still.body;
    const auto retry = object(still).at("retry_after_ms").as_int64();
    EXPECT_LE(retry, 3'600'000 - 1'100) << still.body;
    EXPECT_GT(retry, 3'540'000) << still.body;
    EXPECT_EQ(still.header("Retry-After").value_or(""), std::to_string((retry + 999) / 1000));
  }
  EXPECT_EQ(c.request("POST", "/v1/check", body("login", "someone-else")).status, 200);
}

}  // namespace
}  // namespace floodgate::test
