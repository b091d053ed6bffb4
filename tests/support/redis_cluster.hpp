// A real Redis Cluster for tests: 3 masters + 3 replicas of redis-server on free loopback
// ports (bus port = port + 10000), a short cluster-node-timeout so failovers take ~2 s.
//
//   floodgate::test::redis_cluster cluster;            // started, cluster_state:ok
//   floodgate::limiter limiter{cluster.url()};          // redis+cluster://127.0.0.1:P,...
//   int m = cluster.master_of(cluster.slot_of("k"));    // node index
//   cluster.node(m).kill();                             // or pause(), resume()
//   cluster.wait_master_for(slot, other_than);          // after a failover
//
// Node indices are stable for the fixture's life; roles change with failovers, so ask
// master_of() again after one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {

class redis_cluster {
 public:
  struct options {
    std::chrono::milliseconds node_timeout{1000};  // cluster-node-timeout
    // Non-null: every node also serves TLS with these certificates (tls-cluster yes), and
    // tls_url() names the TLS ports. The plain ports stay for the fixture's own commands.
    const tls_certificates* tls = nullptr;
  };

  redis_cluster() : redis_cluster(options{}) {}
  explicit redis_cluster(options opts);
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  static constexpr int node_count = 6;

  // The seed URL: every node (any one is enough to discover the cluster).
  std::string url() const;
  // rediss+cluster:// on the nodes' TLS ports (options::tls only), then `query`'s options.
  std::string tls_url(const std::string& query) const;
  redis_server& node(int i) { return *nodes_.at(static_cast<std::size_t>(i)); }
  const redis_server& node(int i) const { return *nodes_.at(static_cast<std::size_t>(i)); }
  bool alive(int i) const { return nodes_.at(static_cast<std::size_t>(i))->pid() > 0; }

  // CLUSTER KEYSLOT, asked of a live node.
  int slot_of(const std::string& key) const;
  // The node index serving `slot` as master (by CLUSTER SLOTS from a live node), or -1.
  int master_of(int slot) const;
  // The node index of a live replica of the master at `master`, or -1.
  int replica_of(int master) const;
  // Node indices that are masters with slots now.
  std::vector<int> masters() const;

  // Waits until a live node other than `not_this` serves `slot` and answers as its master,
  // and every live node reports cluster_state:ok. Returns the new master, or -1 on timeout.
  int wait_master_for(int slot, int not_this, std::chrono::milliseconds limit);
  // Waits until every live node says cluster_state:ok; false on timeout.
  bool wait_ok(std::chrono::milliseconds limit) const;

  // How long a failover can take in this cluster, by Redis's rules (cluster.c) and this
  // cluster's node timeout: what a test waits for one, instead of a guess. The election's
  // auth timeout is max(2 × node timeout, 2 s); one failed election is retried after twice it.
  // Each ends with a node timeout for every node to learn the new map (cluster_state:ok).
  //
  // CLUSTER FAILOVER on a replica: Redis gives a manual failover up after 5 s
  // (CLUSTER_MF_TIMEOUT) if it has not started its election by then; then one election.
  std::chrono::milliseconds manual_failover_limit() const;
  // A master that died: a node timeout to suspect it (PFAIL), up to another for the majority's
  // FAIL, the replica's delay (500 ms + up to 500 ms), and an election, retried once.
  std::chrono::milliseconds failover_limit() const;

  // Moves one slot from master `from` to master `to` with SETSLOT IMPORTING/MIGRATING,
  // MIGRATE of its keys in batches, then SETSLOT NODE everywhere. `between_batches` runs
  // after each MIGRATE batch (the window in which clients meet ASK).
  void move_slot(int slot, int from, int to, const std::function<void()>& between_batches = {},
                 int keys_per_batch = 10);
  // move_slot's three steps, for tests that act between them: SETSLOT IMPORTING/MIGRATING
  // (from now on the source answers ASK for keys it no longer has), MIGRATE of the given keys,
  // SETSLOT NODE on the new owner, the old one (which then answers MOVED), then everyone else.
  void begin_migration(int slot, int from, int to);
  void migrate_keys(int from, int to, const std::vector<std::string>& keys);
  void end_migration(int slot, int from, int to);

  // Runs one command on node i (any live node when i < 0).
  reply command(int i, const std::vector<std::string>& args) const;

 private:
  int any_live() const;
  int index_of_port(long long port) const;
  std::string node_id(int i) const;

  std::chrono::milliseconds node_timeout_;
  std::vector<std::unique_ptr<redis_server>> nodes_;
  std::vector<std::uint16_t> tls_ports_;
};

}  // namespace floodgate::test
