// floodgate/inspect.hpp on a real Redis Cluster and real sentinels: the raw state read on the
// node that holds the key (MOVED followed from a seed that does not, ASK while the slot
// migrates), every seed's INFO and TIME, and the Sentinel primary found, and found again after
// a failover.
#include "floodgate/inspect.hpp"

#include <gtest/gtest.h>

#include "cluster_support.hpp"
#include "redis_sentinel.hpp"

namespace floodgate::test {
namespace {

std::string node_of(std::uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

const policy api{"api", algorithm::sliding_log, 10, 1h};

// A limiter whose checks leave state where the inspector of `url` looks (the URL's key_prefix).
limiter checked(const std::string& url) {
  backend_options o;
  o.redis.timeout = 2s;  // two cores shared with six redis-servers: correctness, not latency
  return limiter{url, o};
}

// Seeded with one master only, the inspector reads every master's key there: MOVED names it.
TEST(inspect_api_cluster, follows_moved_from_a_seed_that_does_not_hold_the_key) {
  auto& c = shared_cluster();
  const auto prefix = unique_prefix("insp");
  const auto masters = c.masters();
  ASSERT_EQ(masters.size(), 3u);
  const auto seed = "redis+cluster://127.0.0.1:" + std::to_string(c.node(masters[0]).port()) +
                    "?key_prefix=" + prefix;
  auto l = checked(seed);
  redis_inspector r{seed, 2s};
  for (int m : masters) {
    const auto key = key_on(c, m, "user");
    SCOPED_TRACE(key + " on node " + std::to_string(m));
    for (int i = 0; i < 3; ++i) ASSERT_EQ(l.check(key, api).outcome, outcome::allowed);
    const auto s = r.read_state(api, key);
    ASSERT_EQ(s.error, "");
    EXPECT_EQ(s.node, node_of(c.node(m).port()));
    EXPECT_EQ(s.redis_key, prefix + "api:sl:{" + key + "}");
    EXPECT_EQ(s.type, "zset");
    EXPECT_EQ(s.members, c.command(m, {"ZCARD", s.redis_key}).integer);
    EXPECT_GT(s.members, 0);
    EXPECT_GT(s.ttl_ms, 0);
  }
}

// While its slot migrates the old master answers ASK for a key already moved: the read asks
// the new one (after ASKING). After the migration the old master answers MOVED.
TEST(inspect_api_cluster, follows_ask_while_the_slot_migrates) {
  redis_cluster c;
  const auto masters = c.masters();
  const int from = masters[0], to = masters[1];
  const auto key = key_on(c, from, "user");
  auto l = checked(c.url());
  for (int i = 0; i < 2; ++i) ASSERT_EQ(l.check(key, api).outcome, outcome::allowed);
  const int slot = c.slot_of(key);
  const std::string state_key = "floodgate:api:sl:{" + key + "}";
  const auto members = c.command(from, {"ZCARD", state_key}).integer;
  ASSERT_GT(members, 0);
  c.begin_migration(slot, from, to);
  c.migrate_keys(from, to, {state_key});
  ASSERT_EQ(c.command(from, {"TYPE", state_key}).str.substr(0, 3), "ASK");
  // Seeded with the old master alone, so the first answer is its ASK.
  const auto seed = "redis+cluster://127.0.0.1:" + std::to_string(c.node(from).port());
  auto s = read_raw_state(seed, api, key, 2s);
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.node, node_of(c.node(to).port()));
  EXPECT_EQ(s.members, members);
  c.end_migration(slot, from, to);
  ASSERT_EQ(c.command(from, {"TYPE", state_key}).str.substr(0, 5), "MOVED");
  s = read_raw_state(seed, api, key, 2s);
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.node, node_of(c.node(to).port()));
  EXPECT_EQ(s.members, members);
}

// The nodes are the URL's seeds, as it lists them, and each answers INFO and TIME.
TEST(inspect_api_cluster, asks_each_seed_info_and_time) {
  auto& c = shared_cluster();
  redis_inspector r{c.url(), 2s};
  const auto nodes = r.nodes();
  EXPECT_EQ(nodes.error, "");
  ASSERT_EQ(nodes.nodes.size(), static_cast<std::size_t>(redis_cluster::node_count));
  for (int i = 0; i < redis_cluster::node_count; ++i) {
    EXPECT_EQ(nodes.nodes[static_cast<std::size_t>(i)], node_of(c.node(i).port()));
    const auto info = r.info(nodes.nodes[static_cast<std::size_t>(i)], "cluster");
    EXPECT_NE(info.text.find("cluster_enabled:1"), std::string::npos) << info.error;
    EXPECT_EQ(r.time(nodes.nodes[static_cast<std::size_t>(i)]).error, "");
  }
}

// The primary the sentinels name, for the raw state and as the one node; after a failover, the
// new one (its state replicated), and the old one's questions go nowhere.
TEST(inspect_api_sentinel, finds_the_primary_and_follows_a_failover) {
  redis_sentinel s;
  auto l = checked(s.url());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(l.check("alice", api).outcome, outcome::allowed);
  redis_inspector r{s.url(), 2s};
  const auto first = node_of(s.node(0).port());
  EXPECT_EQ(r.nodes().nodes, std::vector<std::string>{first});
  auto state = r.read_state(api, "alice");
  ASSERT_EQ(state.error, "");
  EXPECT_EQ(state.node, first);
  const auto members = s.node(0).command({"ZCARD", state.redis_key}).integer;
  EXPECT_EQ(state.members, members);
  EXPECT_GT(members, 0);
  EXPECT_NE(r.info(first, "replication").text.find("role:master"), std::string::npos);

  // The replica has the state before it is promoted.
  const auto replicated = [&] {
    return s.node(1).command({"ZCARD", state.redis_key}).integer == members;
  };
  ASSERT_TRUE(wait_for(replicated, 10s));
  const auto failover = s.failover();
  ASSERT_EQ(failover.kind, reply::status) << failover.str;
  ASSERT_TRUE(s.wait_primary_port(s.node(1).port(), 20s));
  const auto second = node_of(s.node(1).port());
  const auto now = r.nodes();
  EXPECT_EQ(now.error, "");
  EXPECT_EQ(now.nodes, std::vector<std::string>{second});
  EXPECT_NE(r.info(second, "replication").text.find("role:master"), std::string::npos);
  EXPECT_NE(r.info(first).error.find("not a node of this URL"), std::string::npos);
  state = r.read_state(api, "alice");
  ASSERT_EQ(state.error, "");
  EXPECT_EQ(state.node, second);
  EXPECT_EQ(state.members, members);
}

// No sentinel names the primary: nodes() says why (each sentinel's words), none before.
TEST(inspect_api_sentinel, a_master_the_sentinels_do_not_know_is_an_error) {
  redis_sentinel s;
  const auto port = s.sentinel_ports().at(0);
  redis_inspector r{"redis+sentinel://127.0.0.1:" + std::to_string(port) + "/nope", 2s};
  const auto nodes = r.nodes();
  EXPECT_TRUE(nodes.nodes.empty());
  EXPECT_NE(nodes.error.find(node_of(port) + ": no master named 'nope'"), std::string::npos)
      << nodes.error;
  const auto state = r.read_state(api, "alice");
  EXPECT_EQ(state.error, nodes.error);
}

}  // namespace
}  // namespace floodgate::test
