// The cluster backend's basics against a real cluster: keys on every master, check_all in
// one slot, cross-slot refusal, reset, readiness, and discovery from one seed.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cluster_support.hpp"

namespace floodgate::test {
namespace {

backend_options options_for(const std::string& prefix) {
  backend_options o;
  o.redis.key_prefix = prefix;
  o.redis.timeout = 1s;  // two cores shared with six redis-servers: correctness, not latency
  return o;
}

// CI once failed when a node drew port 60431 from the kernel's ephemeral range (it ends at
// 60999): a node above 55535 has no bus port and exits at start.
TEST(cluster_fixture, node_ports_leave_room_for_the_bus_port) {
  for (int i = 0; i < 500; ++i) {
    const auto port = free_cluster_port();
    ASSERT_LE(port, 55535);
    ASSERT_GE(port, 1024);
  }
}

TEST(cluster, decides_on_every_master) {
  auto& c = shared_cluster();
  const auto prefix = unique_prefix("basic");
  limiter l{c.url(), options_for(prefix)};
  EXPECT_EQ(l.get_backend().kind(), "redis-cluster");
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"api", algorithm::gcra, 5, 1h};
  const auto masters = c.masters();
  ASSERT_EQ(masters.size(), 3u);
  for (int m : masters) {
    const auto key = key_on(c, m, "user");
    for (int i = 0; i < 5; ++i) EXPECT_EQ(l.check(key, p).outcome, outcome::allowed) << key;
    EXPECT_EQ(l.check(key, p).outcome, outcome::over_limit) << key;
    // The state lives on that master.
    EXPECT_EQ(c.command(m, {"EXISTS", prefix + "api:gt720000:{" + key + "}"}).integer, 1);
    EXPECT_FALSE(l.reset(key, p));
    EXPECT_EQ(l.check(key, p).outcome, outcome::allowed);
  }
  EXPECT_EQ(l.get_backend().stats().redirections, 0u) << "routed by the slot map, no MOVED";
}

TEST(cluster, one_seed_is_enough) {
  auto& c = shared_cluster();
  const auto seed =
      "redis+cluster://127.0.0.1:" + std::to_string(c.node(c.replica_of(c.masters()[0])).port());
  limiter l{seed, options_for(unique_prefix("seed"))};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"api", algorithm::token_bucket, 2, 1h};
  for (int m : c.masters()) EXPECT_EQ(l.check(key_on(c, m, "k"), p).outcome, outcome::allowed);
}

TEST(cluster, first_calls_follow_moved_before_the_map_is_known) {
  auto& c = shared_cluster();
  // A user that may not read the map (CLUSTER SLOTS refused), so it stays unknown however
  // fast the first connection is ready: a race against the first CLUSTER SLOTS lost or won
  // by the scheduler would make this test pass or fail by chance.
  const std::string user = "early" + std::to_string(::getpid());
  for (int i = 0; i < redis_cluster::node_count; ++i)
    ASSERT_EQ(
        c.node(i)
            .command({"ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", "-cluster|slots"})
            .str,
        "OK");
  const std::string scheme = "redis+cluster://";
  limiter l{scheme + user + ":pw@" + c.url().substr(scheme.size()),
            options_for(unique_prefix("early"))};
  const policy p{"api", algorithm::fixed_window, 3, 1h};
  // Without the map, calls go to whichever node is connected first, and the keys of the
  // other masters (at least two of three) come back MOVED and must be followed.
  std::vector<std::future<check_result>> answers;
  for (int m : c.masters()) {
    auto done = std::make_shared<std::promise<check_result>>();
    answers.push_back(done->get_future());
    l.async_check(key_on(c, m, "e"), p, 1, [done](check_result r) { done->set_value(r); });
  }
  for (auto& a : answers) EXPECT_EQ(a.get().outcome, outcome::allowed);
  EXPECT_GE(l.get_backend().stats().redirections, 1u) << "no MOVED was followed";
  // Each key's state was written once, on its own master.
  for (int m : c.masters())
    EXPECT_EQ(l.check(key_on(c, m, "e"), p, 0).decision.remaining, 2) << "master " << m;
}

TEST(cluster, check_all_in_one_slot_and_refused_across_slots) {
  auto& c = shared_cluster();
  limiter l{c.url(), options_for(unique_prefix("multi"))};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy per_user{"user", algorithm::sliding_log, 2, 1h};
  const policy per_user_burst{"burst", algorithm::token_bucket, 10, 1h};
  // The same caller key under two policies: one hash tag, one slot, one atomic script.
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(l.check_all({{"alice", &per_user, 1}, {"alice", &per_user_burst, 1}}).outcome,
              outcome::allowed);
  const auto r = l.check_all({{"alice", &per_user, 1}, {"alice", &per_user_burst, 1}});
  EXPECT_EQ(r.outcome, outcome::over_limit);
  // Different caller keys in different slots: a clear error, not a backend failure.
  const auto bob = key_on(
      c, c.master_of(redis::key_slot("alice")) == c.masters()[0] ? c.masters()[1] : c.masters()[0],
      "bob");
  const auto cross = l.check_all({{"carol", &per_user, 1}, {bob, &per_user, 1}});
  if (redis::key_slot("carol") != redis::key_slot(bob)) {
    EXPECT_EQ(cross.outcome, outcome::invalid_request);
    EXPECT_EQ(cross.error, errc::cross_slot) << cross.error.message();
  }
}

// In local mode, a probe refused before it reached Redis (a check_all across slots: the client
// answers cross_slot itself) says nothing about Redis: the outage goes on and the next call is
// the probe. Before, the refused probe kept the probe's turn for ever, and every later call
// was decided locally with Redis answering.
TEST(cluster, a_local_mode_probe_refused_across_slots_hands_the_probe_on) {
  auto& c = shared_cluster();
  const auto prefix = unique_prefix("probe");
  limiter_options lo;
  lo.local_mode_probe_interval = 50ms;
  limiter l{c.url(), options_for(prefix), lo};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"p", algorithm::fixed_window, 100, 1h, std::nullopt, failure_mode::local,
                 local_denials::off};
  // An outage: a key of another type answers WRONGTYPE, a backend error.
  const auto broken = key_on(c, c.masters()[0], "broken");
  c.command(c.masters()[0], {"LPUSH", prefix + "p:fw:{" + broken + "}", "x"});
  ASSERT_TRUE(l.check(broken, p).local_mode);
  std::this_thread::sleep_for(100ms);  // past the probe interval: the next call probes
  const auto a = key_on(c, c.masters()[0], "a"), b = key_on(c, c.masters()[1], "b");
  const auto cross = l.check_all({{a, &p, 1}, {b, &p, 1}});
  EXPECT_EQ(cross.outcome, outcome::invalid_request);
  EXPECT_EQ(cross.error, errc::cross_slot) << cross.error.message();
  const auto r = l.check(a, p);
  EXPECT_FALSE(r.local_mode) << "the next call is the probe, and Redis answers it";
  EXPECT_EQ(r.outcome, outcome::allowed);
  EXPECT_FALSE(l.stats().local_mode_active);
}

TEST(cluster, hashed_keys_route_by_their_stored_tag) {
  auto& c = shared_cluster();
  const auto prefix = unique_prefix("hashed");
  limiter l{c.url(), options_for(prefix)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"api", algorithm::gcra, 1, 1h};
  for (const std::string& key :
       {std::string("{braces}"), std::string("#hash"), std::string(300, 'x')}) {
    EXPECT_EQ(l.check(key, p).outcome, outcome::allowed) << key;
    EXPECT_EQ(l.check(key, p).outcome, outcome::over_limit) << key;
  }
  EXPECT_EQ(l.get_backend().stats().redirections, 0u);
}

}  // namespace
}  // namespace floodgate::test
