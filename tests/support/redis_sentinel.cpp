#include "redis_sentinel.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "wait_for.hpp"

namespace floodgate::test {

using namespace std::chrono_literals;

namespace {

// The last lines of a log file (a few hundred bytes), for an error message.
std::string log_tail(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const std::exception&) {
  }
  if (text.size() > 600) text = "..." + text.substr(text.size() - 600);
  return text.empty() ? "(empty)" : text;
}

}  // namespace

redis_sentinel::redis_sentinel(options opts)
    : options_(std::move(opts)), dir_(make_temp_dir("floodgate-sentinel-")) {
  // With TLS, each node also listens on a TLS port, and the replica and the sentinels reach
  // the primary there (tls-replication): the address the sentinels name is the TLS one.
  auto node_options = [&](std::vector<std::string> extra) {
    redis_server::options o;
    o.extra_args = {"--repl-diskless-sync-delay", "0"};
    if (options_.tls) {
      tls_ports_.push_back(free_port());
      const auto tls_args = options_.tls->server_args(tls_ports_.back());
      o.extra_args.insert(o.extra_args.end(), tls_args.begin(), tls_args.end());
      o.extra_args.insert(o.extra_args.end(), {"--tls-replication", "yes"});
    }
    o.extra_args.insert(o.extra_args.end(), extra.begin(), extra.end());
    return o;
  };
  nodes_.push_back(std::make_unique<redis_server>(node_options({})));
  const auto primary_port = options_.tls ? tls_ports_[0] : nodes_[0]->port();
  nodes_.push_back(std::make_unique<redis_server>(
      node_options({"--replicaof", "127.0.0.1", std::to_string(primary_port)})));
  if (!wait_for(
          [&] {
            return nodes_[1]->command({"INFO", "replication"}).str.find("master_link_status:up") !=
                   std::string::npos;
          },
          10s))
    throw std::runtime_error("redis_sentinel: replica did not sync");

  for (int i = 0; i < 3; ++i) start_sentinel(i, primary_port);
  // Every sentinel knows the replica and the two other sentinels: a failover can then be
  // agreed and carried out.
  const auto& pw = options_.password;
  for (auto port : sentinel_ports_)
    if (!wait_for(
            [&] {
              return command_at(port, {"SENTINEL", "REPLICAS", master_name}, pw).elements.size() ==
                         1 &&
                     command_at(port, {"SENTINEL", "SENTINELS", master_name}, pw).elements.size() ==
                         2;
            },
            20s)) {
      // What each saw, and its own log's last lines: the cause, not just the symptom.
      std::string why = "redis_sentinel: sentinels did not discover each other within 20 s:";
      for (std::size_t i = 0; i < sentinel_ports_.size(); ++i) {
        const auto p = sentinel_ports_[i];
        why += "\n  sentinel " + std::to_string(i) + " (port " + std::to_string(p) + "): ";
        try {
          why += std::to_string(command_at(p, {"SENTINEL", "REPLICAS", master_name}, pw)
                                    .elements.size()) +
                 " replicas, " +
                 std::to_string(command_at(p, {"SENTINEL", "SENTINELS", master_name}, pw)
                                    .elements.size()) +
                 " other sentinels";
        } catch (const std::exception& e) {
          why += e.what();
        }
        why += "; log ends: " + log_tail(dir_ + "/sentinel" + std::to_string(i) + ".log");
      }
      throw std::runtime_error(why);
    }
}

// Sentinel i on free ports, answering PING. A port can be taken between free_port() and the
// sentinel binding it (it then exits): tried again on others, as redis_server does.
void redis_sentinel::start_sentinel(int i, std::uint16_t primary_port) {
  const auto conf = dir_ + "/sentinel" + std::to_string(i) + ".conf";
  const auto log = dir_ + "/sentinel" + std::to_string(i) + ".log";
  for (int attempt = 0;; ++attempt) {
    const auto port = free_port();
    const std::uint16_t tls_port = options_.tls ? free_port() : 0;
    std::ofstream(conf) << "port " << port << "\nbind 127.0.0.1\ndaemonize no\n"
                        << "dir " << dir_ << "\nlogfile " << log << "\n"
                        << "sentinel monitor " << master_name << " 127.0.0.1 " << primary_port
                        << " 2\n"
                        << "sentinel down-after-milliseconds " << master_name << " "
                        << down_after.count() << "\n"
                        << "sentinel failover-timeout " << master_name << " "
                        << failover_timeout.count() << "\n";
    if (!options_.password.empty())
      std::ofstream(conf, std::ios::app) << "requirepass " << options_.password << "\n"
                                         << "sentinel sentinel-pass " << options_.password << "\n";
    if (options_.tls) {
      const auto* c = options_.tls;
      std::ofstream(conf, std::ios::app)
          << "tls-port " << tls_port << "\ntls-replication yes\n"
          << "tls-cert-file " << c->path("server.crt") << "\ntls-key-file " << c->path("server.key")
          << "\ntls-ca-cert-file " << c->path("ca.crt") << "\n";
    }
    child_process p(std::vector<std::string>{"redis-server", conf, "--sentinel"});
    const auto started = p.wait_ready(
        [&] { return command_at(port, {"PING"}, options_.password).str == "PONG"; }, 10s);
    if (started == child_process::readiness::ready) {
      sentinels_.push_back(std::move(p));
      sentinel_ports_.push_back(port);
      if (options_.tls) tls_ports_.push_back(tls_port);
      return;
    }
    if (started == child_process::readiness::timed_out || attempt == 4)
      throw std::runtime_error("redis_sentinel: sentinel " + std::to_string(i) +
                               " did not start; log ends: " + log_tail(log));
  }
}

reply redis_sentinel::failover(std::chrono::milliseconds within) const {
  reply r;
  for (const auto until = std::chrono::steady_clock::now() + within;;) {
    r = sentinel_command({"SENTINEL", "FAILOVER", master_name});
    if (r.kind == reply::status || std::chrono::steady_clock::now() > until) return r;
    std::this_thread::sleep_for(100ms);
  }
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

std::string redis_sentinel::tls_url(const std::string& query) const {
  if (!options_.tls) throw std::logic_error("redis_sentinel: not started with TLS");
  std::string url = "rediss+sentinel://";
  for (std::size_t i = 2; i < tls_ports_.size(); ++i)
    url += (i > 2 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(tls_ports_[i]);
  return url + "/" + master_name + "?" + query;
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
  return wait_for(
      [&] {
        if (primary_port() != port) return false;
        for (std::size_t i = 0; i < nodes_.size(); ++i)
          if (nodes_[i]->port() == port || (options_.tls && tls_ports_[i] == port))
            return nodes_[i]->command({"ROLE"}).elements.at(0).str == "master";
        return false;
      },
      limit);
}

}  // namespace floodgate::test
