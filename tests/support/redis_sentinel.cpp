#include "redis_sentinel.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace floodgate::test {

using namespace std::chrono_literals;

namespace {

template <class F>
bool wait_until(F done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    try {
      if (done()) return true;
    } catch (const std::exception&) {
    }
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace

redis_sentinel::redis_sentinel(options opts)
    : options_(std::move(opts)), dir_(make_temp_dir("floodgate-sentinel-")) {
  redis_server::options primary;
  primary.extra_args = {"--repl-diskless-sync-delay", "0"};
  nodes_.push_back(std::make_unique<redis_server>(primary));
  redis_server::options replica = primary;
  replica.extra_args.insert(replica.extra_args.end(),
                            {"--replicaof", "127.0.0.1", std::to_string(nodes_[0]->port())});
  nodes_.push_back(std::make_unique<redis_server>(replica));
  if (!wait_until(
          [&] {
            return nodes_[1]->command({"INFO", "replication"}).str.find("master_link_status:up") !=
                   std::string::npos;
          },
          10s))
    throw std::runtime_error("redis_sentinel: replica did not sync");

  for (int i = 0; i < 3; ++i) {
    const auto port = free_port();
    const auto conf = dir_ + "/sentinel" + std::to_string(i) + ".conf";
    std::ofstream(conf) << "port " << port << "\nbind 127.0.0.1\ndaemonize no\n"
                        << "dir " << dir_ << "\nlogfile " << dir_ << "/sentinel" << i << ".log\n"
                        << "sentinel monitor " << master_name << " 127.0.0.1 " << nodes_[0]->port()
                        << " 2\n"
                        << "sentinel down-after-milliseconds " << master_name << " 1000\n"
                        << "sentinel failover-timeout " << master_name << " 5000\n";
    if (!options_.password.empty())
      std::ofstream(conf, std::ios::app) << "requirepass " << options_.password << "\n"
                                         << "sentinel sentinel-pass " << options_.password << "\n";
    sentinels_.emplace_back(std::vector<std::string>{"redis-server", conf, "--sentinel"});
    sentinel_ports_.push_back(port);
  }
  // Every sentinel knows the replica and the two other sentinels: a failover can then be
  // agreed and carried out.
  for (auto port : sentinel_ports_)
    if (!wait_until(
            [&] {
              const auto& pw = options_.password;
              return command_at(port, {"SENTINEL", "REPLICAS", master_name}, pw).elements.size() ==
                         1 &&
                     command_at(port, {"SENTINEL", "SENTINELS", master_name}, pw).elements.size() ==
                         2;
            },
            20s))
      throw std::runtime_error("redis_sentinel: sentinels did not discover each other");
}

redis_sentinel::~redis_sentinel() {
  sentinels_.clear();  // killed first: no failover of a primary going away
  nodes_.clear();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string redis_sentinel::url() const {
  std::string url = "redis+sentinel://";
  for (std::size_t i = 0; i < sentinel_ports_.size(); ++i)
    url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinel_ports_[i]);
  return url + "/" + master_name;
}

reply redis_sentinel::sentinel_command(const std::vector<std::string>& args) const {
  for (auto port : sentinel_ports_) {
    try {
      return command_at(port, args, options_.password);
    } catch (const std::exception&) {
    }
  }
  throw std::runtime_error("redis_sentinel: no sentinel answers");
}

int redis_sentinel::primary_port() const {
  const auto r = sentinel_command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name});
  return r.elements.size() == 2 ? std::stoi(r.elements[1].str) : 0;
}

bool redis_sentinel::wait_primary_port(int port, std::chrono::milliseconds limit) {
  return wait_until(
      [&] {
        if (primary_port() != port) return false;
        for (auto& n : nodes_)
          if (n->port() == port) return n->command({"ROLE"}).elements.at(0).str == "master";
        return false;
      },
      limit);
}

}  // namespace floodgate::test
