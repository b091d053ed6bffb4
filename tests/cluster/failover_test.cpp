// The cluster changing under load: a slot resharded to another master, a manual failover, a
// master killed, a master stalled (circuit breaker). Each test starts its own cluster, since
// it changes the topology. Checks run from several threads throughout; the clock is frozen so
// nothing refills, and the load runs until the limit is spent: admitted == limit unless a
// failover lost writes (which the kill test measures and prints).
#include <gtest/gtest.h>

#include <iostream>

#include "cluster_support.hpp"

namespace floodgate::test {
namespace {

constexpr std::int64_t fixed_ms = 1'800'000'000'000;

backend_options options_for(const std::string& prefix, std::chrono::milliseconds timeout) {
  backend_options o;
  o.redis.key_prefix = prefix;
  o.redis.timeout = timeout;
  o.redis.test_clock = [] { return std::chrono::milliseconds(fixed_ms); };
  return o;
}

TEST(cluster_failover, resharding_a_hot_slot_under_load_keeps_the_limit) {
  redis_cluster c;
  const auto from = c.masters()[0], to = c.masters()[1];
  const auto key = key_on(c, from, "hot");
  const int slot = redis::key_slot(key);
  // Other keys in the slot, so the migration takes several batches: the window in which the
  // source answers ASK for keys already moved.
  for (int i = 0; i < 40; ++i)
    c.command(from, {"SET", "{" + key + "}pad" + std::to_string(i), "x"});
  // The deadline outlasts the whole migration (42 keys, one MIGRATE and 5 ms each, slower on a
  // busy machine): a check_all whose keys it splits waits on TRYAGAIN until they are together.
  limiter l{c.url(), options_for(unique_prefix("reshard"), 3s)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"hot", algorithm::token_bucket, 6000, 1h};
  // Also all-or-nothing checks of two policies on the same caller key: their two keys can
  // sit on different nodes mid-migration, where Redis answers TRYAGAIN.
  const policy q{"hot2", algorithm::gcra, 1'000'000, 1h};
  std::atomic<bool> stop_multi{false};
  std::atomic<std::int64_t> multi_admitted{0}, multi_errors{0};
  std::thread multi([&] {
    // Paced like load's threads: a denial remembered in-process spins at millions a second.
    pacer pace{load::default_per_thread};
    while (!stop_multi) {
      pace();
      const auto r = l.check_all({{key, &p, 1}, {key, &q, 1}});
      if (r.outcome == outcome::allowed) ++multi_admitted;
      if (r.outcome == outcome::backend_error || r.outcome == outcome::invalid_request)
        ++multi_errors;
    }
  });
  load ld(l, key, p, 3);
  ASSERT_TRUE(wait_for([&] { return ld.admitted > 200; }, 10s));
  // One key per MIGRATE, so the two keys of the check_all spend a while on different nodes.
  c.move_slot(
      slot, from, to, [] { std::this_thread::sleep_for(5ms); }, 1);
  const auto admitted_at_move = ld.admitted.load();
  ASSERT_TRUE(
      wait_for([&] { return ld.denied > 500; }, ld.time_for(p.limit() - admitted_at_move + 500)))
      << "admitted " << ld.admitted;
  ld.stop();
  stop_multi = true;
  multi.join();
  EXPECT_EQ(c.master_of(slot), to);
  EXPECT_LT(admitted_at_move, p.limit()) << "the move must happen while capacity is left";
  EXPECT_EQ(ld.errors, 0) << ld.error_summary();
  EXPECT_EQ(multi_errors, 0);
  EXPECT_GT(multi_admitted, 0);
  EXPECT_EQ(ld.admitted + multi_admitted, p.limit());
  EXPECT_GT(l.get_backend().stats().redirections, 0u);
  std::cout << "reshard: " << ld.total() << " checks, " << l.get_backend().stats().redirections
            << " redirections followed, slowest answer " << ld.max_us / 1000 << " ms\n";
}

// An all-or-nothing check whose two keys a migration has split is answered TRYAGAIN until the
// second key follows. A slow migration (many keys, a busy machine) can take longer than a few
// retries: the check waits for it as long as its deadline allows, and does not fail early.
TEST(cluster_failover, a_check_split_by_a_slow_migration_waits_within_its_deadline) {
  redis_cluster c;
  const auto from = c.masters()[0], to = c.masters()[1];
  const auto key = key_on(c, from, "split");
  const int slot = redis::key_slot(key);
  const auto prefix = unique_prefix("split");
  limiter l{c.url(), options_for(prefix, 3s)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"a", algorithm::fixed_window, 10, 1h}, q{"b", algorithm::fixed_window, 10, 1h};
  ASSERT_EQ(l.check_all({{key, &p, 1}, {key, &q, 1}}).outcome, outcome::allowed);
  c.begin_migration(slot, from, to);
  c.migrate_keys(from, to, {prefix + "a:fw:{" + key + "}"});
  const auto split_for = 600ms;
  std::thread mover([&] {
    std::this_thread::sleep_for(split_for);
    c.migrate_keys(from, to, {prefix + "b:fw:{" + key + "}"});
    c.end_migration(slot, from, to);
  });
  const auto start = std::chrono::steady_clock::now();
  const auto r = l.check_all({{key, &p, 1}, {key, &q, 1}});
  const auto took = std::chrono::steady_clock::now() - start;
  mover.join();
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_GE(took, split_for - 50ms) << "answered before the keys were together again";
  EXPECT_EQ(l.check(key, p, 0).decision.remaining, 8);
  EXPECT_EQ(l.check(key, q, 0).decision.remaining, 8);
}

TEST(cluster_failover, ask_is_followed_per_call_and_moved_updates_the_map) {
  redis_cluster c;
  const auto from = c.masters()[0], to = c.masters()[1];
  const auto key = key_on(c, from, "ask");
  const int slot = redis::key_slot(key);
  const auto prefix = unique_prefix("ask");
  limiter l{c.url(), options_for(prefix, 1s)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"api", algorithm::gcra, 10, 1h};
  ASSERT_EQ(l.check(key, p).outcome, outcome::allowed);
  const auto state_key = prefix + "api:gt360000:{" + key + "}";
  // Mid-migration, with the key already on the importing node: the source answers ASK.
  c.begin_migration(slot, from, to);
  c.migrate_keys(from, to, {state_key});
  for (int i = 1; i <= 3; ++i) {
    const auto r = l.check(key, p);
    ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
    EXPECT_EQ(r.decision.remaining, 10 - 1 - i) << "the state moved with the key";
    // One ASK per call: the slot still belongs to the source until the move ends.
    EXPECT_EQ(l.get_backend().stats().redirections, static_cast<std::uint64_t>(i));
  }
  // (EXISTS on the importing node would answer MOVED without ASKING: count the slot instead.)
  EXPECT_EQ(c.command(to, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, 1);
  EXPECT_EQ(c.command(from, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, 0);
  // The move ends: one MOVED, then the map knows.
  c.end_migration(slot, from, to);
  EXPECT_EQ(l.check(key, p).decision.remaining, 5);
  EXPECT_EQ(l.get_backend().stats().redirections, 4u);
  EXPECT_EQ(l.check(key, p).decision.remaining, 4);
  EXPECT_EQ(l.get_backend().stats().redirections, 4u);
}

TEST(cluster_failover, manual_failover_under_load_keeps_the_limit) {
  redis_cluster c;
  const auto m = c.masters()[0];
  const auto replica = c.replica_of(m);
  ASSERT_GE(replica, 0);
  const auto key = key_on(c, m, "hot");
  const int slot = redis::key_slot(key);
  limiter l{c.url(), options_for(unique_prefix("manual"), 2s)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"hot", algorithm::sliding_log, 6000, 1h};
  // Load throughout the failover: at this rate the limit lasts as long as the failover may
  // (unpaced, the limit was spent in a second or, once denials were remembered, the load
  // spun on them at millions a second and starved the failover of CPU).
  constexpr int threads = 4;
  const double per_thread =
      static_cast<double>(p.limit()) /
      (threads * std::chrono::duration<double>(c.manual_failover_limit()).count());
  load ld(l, key, p, threads, per_thread);
  ASSERT_TRUE(wait_for([&] { return ld.admitted > 200; }, ld.time_for(200)));
  // The replica catches up with the master (which pauses its clients meanwhile) before
  // taking over: no acknowledged write is lost.
  c.command(replica, {"CLUSTER", "FAILOVER"});
  EXPECT_EQ(c.wait_master_for(slot, m, c.manual_failover_limit()), replica);
  EXPECT_LT(ld.admitted, p.limit()) << "the failover must happen while capacity is left";
  ASSERT_TRUE(wait_for([&] { return ld.denied > 500; }, ld.time_for(p.limit() - ld.admitted + 500)))
      << "admitted " << ld.admitted;
  ld.stop();
  EXPECT_EQ(ld.errors, 0) << "slowest error " << ld.error_us / 1000 << " ms; "
                          << ld.error_summary();
  EXPECT_EQ(ld.admitted, p.limit());
  EXPECT_GE(l.get_backend().stats().failovers_seen, 1u);
  std::cout << "manual failover: " << ld.total() << " checks, slowest answer " << ld.max_us / 1000
            << " ms\n";
}

// A master demoted by a failover leaves the slot map: the client stops connecting to it (with
// pod churn, every node ever learned would otherwise reconnect forever). A seed is kept.
TEST(cluster_failover, a_node_that_leaves_the_map_is_dropped) {
  redis_cluster c;
  const auto masters = c.masters();
  const int seed = masters[0], leaving = masters[1];
  const int replica = c.replica_of(leaving);
  ASSERT_GE(replica, 0);
  const auto clients_of = [&](int node) {
    const auto info = c.command(node, {"INFO", "clients"}).str;
    const std::string field = "connected_clients:";
    return std::stoi(info.substr(info.find(field) + field.size()));  // this INFO's own included
  };
  limiter l{"redis+cluster://127.0.0.1:" + std::to_string(c.node(seed).port()),
            options_for(unique_prefix("leave"), 2s)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"p", algorithm::gcra, 1000, 1h};
  const auto key = key_on(c, leaving, "user");
  ASSERT_EQ(l.check(key, p).outcome, outcome::allowed);
  const auto known = l.get_backend().stats().nodes_known;
  EXPECT_EQ(known, 3u) << "the seed, then the masters of the map";
  // The node's pool opens its connections in the background (one may still be connecting).
  const int pool = 1 + static_cast<int>(redis_options{}.connections);
  EXPECT_TRUE(wait_for([&] { return clients_of(leaving) == pool; }, 5s))
      << clients_of(leaving) << " clients, expected " << pool;

  c.command(replica, {"CLUSTER", "FAILOVER"});
  ASSERT_EQ(c.wait_master_for(redis::key_slot(key), leaving, c.manual_failover_limit()), replica);
  // The next call meets MOVED (or a refresh finds the new master): the map is read again,
  // and the demoted node, a replica now, is no longer in it.
  ASSERT_TRUE(wait_for([&] { return l.check(key, p).outcome == outcome::allowed; }, 10s));
  ASSERT_TRUE(wait_for([&] { return l.get_backend().stats().nodes_retired >= 1; }, 10s));
  // A replica the client never used counts the same clients: this INFO's and its master link.
  const int untouched = c.replica_of(seed);
  EXPECT_TRUE(wait_for([&] { return clients_of(leaving) == clients_of(untouched); }, 5s))
      << clients_of(leaving) - clients_of(untouched) << " connections from the client still open";
  EXPECT_EQ(l.get_backend().stats().nodes_known, 3u) << "the new master replaced the old one";
  // The slots it served are served: decisions go on.
  EXPECT_EQ(l.check(key, p).outcome, outcome::allowed);
}

TEST(cluster_failover, killed_master_answers_the_failure_mode_then_recovers) {
  redis_cluster c;
  const auto m = c.masters()[0];
  const auto key = key_on(c, m, "hot");
  const int slot = redis::key_slot(key);
  constexpr auto timeout = 200ms;
  limiter l{c.url(), options_for(unique_prefix("kill"), timeout)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"hot", algorithm::fixed_window, 20000, 1h};  // failure mode: closed
  load ld(l, key, p, 4);
  ASSERT_TRUE(wait_for([&] { return ld.admitted > 2000; }, ld.time_for(2000)));
  // The replica streams what the master had a moment ago: on a loaded machine it can lag far
  // behind, and then its whole backlog would count as "lost writes", not a replication lag.
  const auto offset = [&](int node, const std::string& field) {
    const auto info = c.command(node, {"INFO", "replication"}).str;
    const auto at = info.find(field + ":");
    return at == std::string::npos ? -1LL : std::stoll(info.substr(at + field.size() + 1));
  };
  // Every admission counted before this INFO was acknowledged before it, so it is inside
  // `sent`, which the replica then holds.
  const long long admitted_at_sync = ld.admitted;
  const long long sent = offset(m, "master_repl_offset");
  ASSERT_TRUE(wait_for([&] { return offset(c.replica_of(m), "slave_repl_offset") >= sent; }, 10s));
  const auto killed_at = std::chrono::steady_clock::now();
  c.node(m).kill();
  // Every admission the old master acknowledged is counted 100 ms later (loopback replies in
  // flight at the kill are read by then), and none is yet from the new one: a replica is
  // promoted only after the cluster's node timeout, far longer.
  std::this_thread::sleep_for(100ms);
  const long long admitted_at_kill = ld.admitted;
  const int promoted = c.wait_master_for(slot, m, c.failover_limit());
  ASSERT_GE(promoted, 0) << "no replica took over";
  const auto down_for = std::chrono::steady_clock::now() - killed_at;
  // Calls keep working on the new master (the client finds it by itself), which counts at
  // least what the replica held at `sent`.
  ASSERT_TRUE(
      wait_for([&] { return ld.denied > 500; }, ld.time_for(p.limit() - admitted_at_sync + 500)))
      << "admitted " << ld.admitted;
  const auto errors_after = ld.errors.load();
  std::this_thread::sleep_for(200ms);
  ld.stop();
  EXPECT_GT(ld.errors, 0) << "the slot was down for a while";
  std::cout << "errors: " << ld.error_summary() << "\n";
  EXPECT_EQ(ld.errors, errors_after) << "no errors once the limit is reached on the new master";
  // Every failure answered by its deadline. The margin is the client's own scheduling, not
  // the design's: a thread on two cores shared with six redis-servers under load can run
  // that late (the deadline timer itself fires within a millisecond).
  constexpr auto scheduling_margin = 500ms;
  EXPECT_LE(ld.error_us,
            std::chrono::duration_cast<std::chrono::microseconds>(timeout + scheduling_margin)
                .count());
  EXPECT_GE(l.get_backend().stats().failovers_seen, 1u);
  // The documented contract: acknowledged admissions that had not reached the replica are
  // forgotten by it, so the same capacity is admitted again. Checks that failed after running
  // (lost in flight) consumed capacity without being counted as admitted.
  const auto extra = ld.admitted - p.limit();
  std::cout << "master kill: slot down "
            << std::chrono::duration_cast<std::chrono::milliseconds>(down_for).count() << " ms, "
            << ld.errors << " checks answered by the failure mode (slowest " << ld.error_us / 1000
            << " ms), " << ld.admitted << " admitted of limit " << p.limit()
            << ": extra admissions from lost writes = " << extra << "\n";
  RecordProperty("extra_admissions", std::to_string(extra));
  // Only what the old master acknowledged after the replica was known to hold `sent` can
  // have been lost with it, so the extra admissions are at most those.
  EXPECT_LE(extra, admitted_at_kill - admitted_at_sync)
      << "more than the admissions the replica could have missed";
}

TEST(cluster_failover, stalled_master_opens_the_breaker_and_closes_after) {
  redis_cluster::options opts;
  opts.node_timeout = 5s;  // the stall must not look like a failure to the cluster
  redis_cluster c{opts};
  const auto m = c.masters()[0];
  const auto key = key_on(c, m, "hot");
  constexpr auto timeout = 100ms;
  limiter l{c.url(), options_for(unique_prefix("breaker"), timeout)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"hot", algorithm::gcra, 1'000'000, 1h};
  load ld(l, key, p, 2);
  ASSERT_TRUE(wait_for([&] { return ld.admitted > 100; }, ld.time_for(100)));
  c.node(m).pause();
  ASSERT_TRUE(wait_for([&] { return l.get_backend().stats().breakers_open == 1; }, 5s));
  // While open, a check of that node answers at once instead of waiting for its deadline.
  const auto start = std::chrono::steady_clock::now();
  const auto r = l.check(key, p);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.outcome, outcome::backend_error);
  EXPECT_LT(took, timeout / 2);
  EXPECT_FALSE(l.get_backend().healthy());
  c.node(m).resume();
  ASSERT_TRUE(wait_for([&] { return l.get_backend().stats().breakers_open == 0; }, 5s));
  const auto admitted = ld.admitted.load();
  ASSERT_TRUE(wait_for([&] { return ld.admitted > admitted + 100; }, ld.time_for(100)));
  ld.stop();
  EXPECT_GE(l.get_backend().stats().breaker_opens, 1u);
  EXPECT_TRUE(wait_healthy(l.get_backend(), 2s));
}

// The breaker's threshold comes from the options (here the URL's): set high, a stall is
// answered call by call at the deadline and the breaker stays closed.
TEST(cluster_failover, the_breaker_threshold_is_an_option) {
  redis_cluster::options opts;
  opts.node_timeout = 5s;
  redis_cluster c{opts};
  const auto m = c.masters()[0];
  const auto key = key_on(c, m, "hot");
  constexpr auto timeout = 50ms;
  limiter l{c.url() + "?breaker_failures=1000", options_for(unique_prefix("nobreaker"), timeout)};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"hot", algorithm::gcra, 1'000'000, 1h};
  ASSERT_EQ(l.check(key, p).outcome, outcome::allowed);
  c.node(m).pause();
  int at_deadline = 0;
  for (int i = 0; i < 12; ++i) {  // more than the default threshold of 5
    const auto start = std::chrono::steady_clock::now();
    const auto r = l.check(key, p);
    EXPECT_EQ(r.outcome, outcome::backend_error);
    if (r.error == errc::timeout && std::chrono::steady_clock::now() - start >= timeout - 5ms)
      ++at_deadline;
  }
  EXPECT_GE(at_deadline, 6) << "the stalled node was asked every time, not skipped";
  EXPECT_EQ(l.get_backend().stats().breaker_opens, 0u);
  c.node(m).resume();
  EXPECT_TRUE(wait_for([&] { return l.check(key, p).outcome == outcome::allowed; }, 5s));
}

}  // namespace
}  // namespace floodgate::test
