// The raw state of a key (GET /v1/inspect and `floodgate inspect`) on Redis Cluster and
// Sentinel, plain and TLS: read on the node that holds it (the slot's master, found by
// following MOVED and ASK from the seeds; the primary the sentinels name), consuming nothing;
// failures name the node and quote the server.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "fake_sentinel.hpp"
#include "inspect_helpers.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

// A caller key for each master, by master index.
std::map<int, std::string> key_per_master(const redis_cluster& cluster) {
  std::map<int, std::string> keys;
  for (int i = 0; keys.size() < 3 && i < 1000; ++i) {
    const std::string key = "user-" + std::to_string(i);
    keys.emplace(cluster.master_of(cluster.slot_of(key)), key);
  }
  EXPECT_EQ(keys.size(), 3u);
  return keys;
}

// The i-th host:port of a cluster URL (the fixture lists node i i-th).
std::string seed(const std::string& url, int i) {
  auto rest = url.substr(url.find("//") + 2);
  rest = rest.substr(0, rest.find_first_of("?/"));
  for (; i > 0; --i) rest = rest.substr(rest.find(',') + 1);
  return rest.substr(0, rest.find(','));
}

// For a key on each master: checked 3 times, inspected twice by the admin listener and once by
// the CLI, each showing 7 left and the zset on that master (which holds the key: PTTL there);
// the next check leaves 6: inspecting consumed nothing.
void expect_each_master_inspected(redis_cluster& cluster, const std::string& url) {
  inspected_floodgated f(url);
  for (const auto& [master, key] : key_per_master(cluster)) {
    SCOPED_TRACE(key + " on node " + std::to_string(master));
    f.check(key, 3);
    const std::string state_key = "floodgate:api:sl:{" + key + "}";
    ASSERT_GT(cluster.command(master, {"PTTL", state_key}).integer, 0);
    for (int i = 0; i < 2; ++i) expect_raw_state(f.inspect(key), key, 3, seed(url, master));
    expect_cli_raw_state(url, key, 3, seed(url, master));
    http_connection c(f.fg.port());
    const auto next = c.request("POST", "/v1/check", R"({"rule":"api","key":")" + key + R"("})");
    EXPECT_NE(next.body.find(R"("remaining":6)"), std::string::npos) << next.body;
  }
  // A key never checked: no state on its master, and the peek leaves none.
  const auto o = f.inspect("nobody");
  EXPECT_EQ(o.at("remaining"), 10);
  EXPECT_EQ(o.at("raw").at("type"), "none") << boost::json::serialize(o);
  EXPECT_EQ(o.at("raw").at("ttl_ms"), -2);
}

TEST(inspect_cluster, reads_the_raw_state_on_each_master) {
  redis_cluster cluster;
  expect_each_master_inspected(cluster, cluster.url());
}

TEST(inspect_cluster, reads_the_raw_state_on_each_master_over_tls) {
  tls_certificates certs;
  redis_cluster::options o;
  o.tls = &certs;
  redis_cluster cluster(o);
  expect_each_master_inspected(cluster, cluster.tls_url(certs.client_query()));
}

// While its slot migrates, a key already moved is answered with ASK by the old master: the raw
// read asks the new one (after ASKING) and finds it there.
TEST(inspect_cluster, follows_ask_while_the_slot_migrates) {
  redis_cluster cluster;
  inspected_floodgated f(cluster.url());
  const auto keys = key_per_master(cluster);
  const auto& [from, key] = *keys.begin();
  const int to = std::next(keys.begin())->first;
  f.check(key, 3);
  const int slot = cluster.slot_of(key);
  const std::string state_key = "floodgate:api:sl:{" + key + "}";
  cluster.begin_migration(slot, from, to);
  cluster.migrate_keys(from, to, {state_key});
  ASSERT_EQ(cluster.command(from, {"TYPE", state_key}).str.substr(0, 3), "ASK");
  expect_raw_state(f.inspect(key), key, 3, loopback(cluster.node(to).port()));
  cluster.end_migration(slot, from, to);
  // Then the old master answers MOVED, and the read goes there the same way.
  expect_raw_state(f.inspect(key), key, 3, loopback(cluster.node(to).port()));
}

// Through the primary the sentinels name, and after a failover the new one, asked again.
TEST(inspect_sentinel, reads_the_raw_state_on_the_primary) {
  redis_sentinel s;
  inspected_floodgated f(s.url());
  f.check("alice", 3);
  expect_raw_state(f.inspect("alice"), "alice", 3, loopback(s.node(0).port()));
  expect_raw_state(f.inspect("alice"), "alice", 3, loopback(s.node(0).port()));
  expect_cli_raw_state(s.url(), "alice", 3, loopback(s.node(0).port()));

  const auto failover = s.failover();
  ASSERT_EQ(failover.kind, reply::status) << failover.str;
  ASSERT_TRUE(s.wait_primary_port(s.node(1).port(), 20s));
  // The replica had the state (replicated before the failover: its TTL as the primary's).
  expect_cli_raw_state(s.url(), "alice", 3, loopback(s.node(1).port()));
}

TEST(inspect_sentinel, reads_the_raw_state_over_tls) {
  tls_certificates certs;
  redis_sentinel::options so;
  so.tls = &certs;
  redis_sentinel s{so};
  const auto url = s.tls_url(certs.client_query());
  inspected_floodgated f(url);
  f.check("alice", 3);
  expect_raw_state(f.inspect("alice"), "alice", 3, loopback(s.tls_port(0)));
  expect_cli_raw_state(url, "alice", 3, loopback(s.tls_port(0)));
}

// Right after a failover a sentinel that has not heard of it still names the old primary:
// the read goes to the newest configuration's primary, whichever sentinel answers first
// (before: the first in the URL, so here the old primary, whose state the resync erases).
TEST(inspect_sentinel, the_newest_configuration_names_the_primary) {
  redis_server old_primary, new_primary;
  fake_sentinel stale{old_primary.port(), 1}, told{new_primary.port(), 2};
  for (const auto& url : {sentinel_url_of({&stale, &told}), sentinel_url_of({&told, &stale})}) {
    temp_rules_file rules(inspect_rules);
    const auto r = run_floodgate_cli({"inspect", "--redis", url, "--rules", rules.path, "api", "a"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(cli_field(r.output, "redis_node"), loopback(new_primary.port())) << r.output;
  }
}

// A master name the sentinels do not know, and sentinels that do not answer: the error names
// each sentinel and what it said (or why it could not).
TEST(inspect_sentinel, errors_name_each_sentinel) {
  redis_sentinel s;
  temp_rules_file rules(inspect_rules);
  const auto& ports = s.sentinel_ports();
  const std::string unknown = "redis+sentinel://127.0.0.1:" + std::to_string(ports[0]) +
                              ",127.0.0.1:" + std::to_string(ports[1]) + "/nope";
  auto r = run_floodgate_cli({"inspect", "--redis", unknown, "--rules", rules.path, "api", "a"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (int i = 0; i < 2; ++i)
    EXPECT_NE(r.output.find(loopback(ports[i]) + ": no master named 'nope'"), std::string::npos)
        << r.output;

  const auto closed = free_port();
  r = run_floodgate_cli({"inspect", "--redis",
                         "redis+sentinel://127.0.0.1:" + std::to_string(closed) + "/fg", "--rules",
                         rules.path, "api", "a"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no sentinel named the primary: " + loopback(closed) + ": connect: "),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace floodgate::test
