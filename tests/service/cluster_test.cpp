// floodgated on a real Redis Cluster (3 masters + 3 replicas): a group whose rules share the
// caller key is decided all-or-nothing on whichever master owns that key's slot; a group that
// cannot share a slot is refused when the file is loaded (here on SIGHUP; start-up is covered
// in process_test.cpp), and the rules in force stay. The Redis sampler answers for each seed.
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
  opts.extra_args = {"--redis", cluster.url()};
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

}  // namespace
}  // namespace floodgate::test
