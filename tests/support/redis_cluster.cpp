#include "redis_cluster.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace floodgate::test {

using namespace std::chrono_literals;

redis_cluster::redis_cluster(options opts) : node_timeout_(opts.node_timeout) {
  redis_server::options node_options;
  node_options.cluster_port = true;  // a node on a port above 55535 exits at start
  node_options.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                             "--cluster-node-timeout", std::to_string(opts.node_timeout.count()),
                             "--cluster-require-full-coverage", "yes",
                             // Replicas sync at once (the default waits 5 s for more replicas
                             // to share one transfer): an unsynced replica cannot fail over.
                             "--repl-diskless-sync-delay", "0"};
  if (opts.tls)
    node_options.extra_args.insert(node_options.extra_args.end(),
                                   {"--tls-cluster", "yes", "--tls-replication", "yes"});
  for (int i = 0; i < node_count; ++i) {
    auto o = node_options;
    if (opts.tls) {
      // With tls-cluster the bus listens on the TLS port + 10000: it must exist too.
      tls_ports_.push_back(free_cluster_port());
      const auto tls_args = opts.tls->server_args(tls_ports_.back());
      o.extra_args.insert(o.extra_args.end(), tls_args.begin(), tls_args.end());
    }
    nodes_.push_back(std::make_unique<redis_server>(o));
  }
  // Bounded: a redis-cli stuck waiting for the nodes to agree would hold the test until ctest's
  // own timeout (1,500 s) instead of failing it here.
  std::string cmd = "timeout 60 redis-cli --cluster create";
  for (const auto& n : nodes_) cmd += " 127.0.0.1:" + std::to_string(n->port());
  cmd += " --cluster-replicas 1 --cluster-yes >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("redis_cluster: create failed");
  if (!wait_ok(20s)) throw std::runtime_error("redis_cluster: cluster_state not ok in 20 s");
  // Every master needs a replica that finished its first sync, or it could not take over.
  for (int m : masters())
    for (auto until = std::chrono::steady_clock::now() + 10s;;) {
      const int r = replica_of(m);
      if (r >= 0 && command(r, {"INFO", "replication"}).str.find("master_link_status:up") !=
                        std::string::npos)
        break;
      if (std::chrono::steady_clock::now() > until)
        throw std::runtime_error("redis_cluster: a master has no synced replica");
      std::this_thread::sleep_for(20ms);
    }
}

std::string redis_cluster::url() const {
  std::string url = "redis+cluster://";
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(nodes_[i]->port());
  return url;
}

std::string redis_cluster::tls_url(const std::string& query) const {
  if (tls_ports_.empty()) throw std::logic_error("redis_cluster: not started with TLS");
  std::string url = "rediss+cluster://";
  for (std::size_t i = 0; i < tls_ports_.size(); ++i)
    url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(tls_ports_[i]);
  return url + "?" + query;
}

int redis_cluster::any_live() const {
  for (int i = 0; i < node_count; ++i)
    if (alive(i)) return i;
  throw std::runtime_error("redis_cluster: no live node");
}

int redis_cluster::index_of_port(long long port) const {
  for (int i = 0; i < node_count; ++i) {
    const auto n = static_cast<std::size_t>(i);
    if (nodes_[n]->port() == port || (n < tls_ports_.size() && tls_ports_[n] == port)) return i;
  }
  return -1;
}

reply redis_cluster::command(int i, const std::vector<std::string>& args) const {
  return node(i < 0 ? any_live() : i).command(args);
}

int redis_cluster::slot_of(const std::string& key) const {
  return static_cast<int>(command(-1, {"CLUSTER", "KEYSLOT", key}).integer);
}

int redis_cluster::master_of(int slot) const {
  for (int i = 0; i < node_count; ++i) {
    if (!alive(i)) continue;
    try {
      const auto r = command(i, {"CLUSTER", "SLOTS"});
      for (const auto& range : r.elements)
        if (range.elements.at(0).integer <= slot && slot <= range.elements.at(1).integer)
          return index_of_port(range.elements.at(2).elements.at(1).integer);
      return -1;
    } catch (const std::exception&) {
    }
  }
  return -1;
}

int redis_cluster::replica_of(int master) const {
  for (int i = 0; i < node_count; ++i) {
    if (i == master || !alive(i)) continue;
    try {
      const auto r = command(i, {"ROLE"});
      // A TLS replica names its master's TLS port.
      if (r.elements.size() >= 3 && r.elements[0].str == "slave" &&
          index_of_port(r.elements[2].integer) == master)
        return i;
    } catch (const std::exception&) {
    }
  }
  return -1;
}

std::vector<int> redis_cluster::masters() const {
  std::vector<int> out;
  const auto r = command(-1, {"CLUSTER", "SLOTS"});
  for (const auto& range : r.elements) {
    const int m = index_of_port(range.elements.at(2).elements.at(1).integer);
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  }
  return out;
}

std::string redis_cluster::node_id(int i) const {
  return command(i, {"CLUSTER", "MYID"}).str;
}

namespace {

constexpr std::chrono::milliseconds manual_failover_timeout{5000};  // CLUSTER_MF_TIMEOUT

std::chrono::milliseconds auth_timeout(std::chrono::milliseconds node_timeout) {
  return std::max(2 * node_timeout, std::chrono::milliseconds(2000));
}

}  // namespace

std::chrono::milliseconds redis_cluster::manual_failover_limit() const {
  return manual_failover_timeout + auth_timeout(node_timeout_) + node_timeout_;
}

std::chrono::milliseconds redis_cluster::failover_limit() const {
  const auto election = auth_timeout(node_timeout_);
  const auto detection = 2 * node_timeout_;
  const auto replica_delay = 1000ms;
  // An election, a wait of twice its timeout, a second election.
  return detection + replica_delay + election + 2 * election + election + node_timeout_;
}

bool redis_cluster::wait_ok(std::chrono::milliseconds limit) const {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool ok = true;
    for (int i = 0; i < node_count && ok; ++i) {
      if (!alive(i)) continue;
      try {
        ok = command(i, {"CLUSTER", "INFO"}).str.find("cluster_state:ok") != std::string::npos;
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (ok) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
}

int redis_cluster::wait_master_for(int slot, int not_this, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    for (int i = 0; i < node_count; ++i) {
      if (i == not_this || !alive(i)) continue;
      try {
        if (command(i, {"ROLE"}).elements.at(0).str != "master") continue;
        const auto r = command(i, {"CLUSTER", "SLOTS"});
        for (const auto& range : r.elements)
          if (range.elements.at(0).integer <= slot && slot <= range.elements.at(1).integer &&
              index_of_port(range.elements.at(2).elements.at(1).integer) == i &&
              wait_ok(std::chrono::milliseconds(0)))
            return i;
      } catch (const std::exception&) {
      }
    }
    if (std::chrono::steady_clock::now() > until) return -1;
    std::this_thread::sleep_for(20ms);
  }
}

namespace {

void expect_ok(const reply& r, const char* what) {
  if (r.kind == reply::error) throw std::runtime_error(std::string(what) + ": " + r.str);
}

}  // namespace

void redis_cluster::begin_migration(int slot, int from, int to) {
  const auto s = std::to_string(slot);
  expect_ok(command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)}), "IMPORTING");
  expect_ok(command(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)}), "MIGRATING");
}

void redis_cluster::migrate_keys(int from, int to, const std::vector<std::string>& keys) {
  std::vector<std::string> migrate = {
      "MIGRATE", "127.0.0.1", std::to_string(node(to).port()), "", "0", "5000", "KEYS"};
  migrate.insert(migrate.end(), keys.begin(), keys.end());
  expect_ok(command(from, migrate), "MIGRATE");
}

void redis_cluster::end_migration(int slot, int from, int to) {
  const auto s = std::to_string(slot);
  const auto to_id = node_id(to);
  expect_ok(command(to, {"CLUSTER", "SETSLOT", s, "NODE", to_id}), "SETSLOT NODE (to)");
  expect_ok(command(from, {"CLUSTER", "SETSLOT", s, "NODE", to_id}), "SETSLOT NODE (from)");
  for (int i = 0; i < node_count; ++i)
    if (i != from && i != to && alive(i)) command(i, {"CLUSTER", "SETSLOT", s, "NODE", to_id});
}

void redis_cluster::move_slot(int slot, int from, int to,
                              const std::function<void()>& between_batches, int keys_per_batch) {
  begin_migration(slot, from, to);
  for (;;) {
    const auto keys = command(from, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot),
                                     std::to_string(keys_per_batch)});
    if (keys.elements.empty()) break;
    std::vector<std::string> names;
    for (const auto& k : keys.elements) names.push_back(k.str);
    migrate_keys(from, to, names);
    if (between_batches) between_batches();
  }
  end_migration(slot, from, to);
}

}  // namespace floodgate::test
