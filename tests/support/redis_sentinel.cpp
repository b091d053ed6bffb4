#include "redis_sentinel.hpp"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace floodgate::test {

using namespace std::chrono_literals;

namespace {

reply command_on(std::uint16_t port, const std::vector<std::string>& args,
                 const std::string& password = {}) {
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    throw std::runtime_error("redis_sentinel: connect failed");
  }
  redisSetTimeout(c, tv);
  if (!password.empty())
    if (auto* auth = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password.c_str())))
      freeReplyObject(auth);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  reply out;
  if (r) {
    if (r->type == REDIS_REPLY_ARRAY) {
      out.kind = reply::array;
      for (size_t i = 0; i < r->elements; ++i) {
        reply e;
        e.kind = r->element[i]->type == REDIS_REPLY_INTEGER ? reply::number : reply::string;
        if (r->element[i]->str) e.str.assign(r->element[i]->str, r->element[i]->len);
        e.integer = r->element[i]->integer;
        out.elements.push_back(e);
      }
    } else {
      out.kind = r->type == REDIS_REPLY_ERROR ? reply::error : reply::string;
      if (r->str) out.str.assign(r->str, r->len);
      out.integer = r->integer;
    }
    freeReplyObject(r);
  }
  redisFree(c);
  if (!r) throw std::runtime_error("redis_sentinel: command failed");
  return out;
}

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

redis_sentinel::redis_sentinel(options opts) : options_(std::move(opts)) {
  char tmpl[] = "/tmp/floodgate-sentinel-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("redis_sentinel: mkdtemp failed");
  dir_ = tmpl;
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
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("redis_sentinel: fork failed");
    if (pid == 0) {
      ::execlp("redis-server", "redis-server", conf.c_str(), "--sentinel", nullptr);
      ::_exit(127);
    }
    sentinel_pids_.push_back(pid);
    sentinel_ports_.push_back(port);
  }
  // Every sentinel knows the replica and the two other sentinels: a failover can then be
  // agreed and carried out.
  for (auto port : sentinel_ports_)
    if (!wait_until(
            [&] {
              const auto& pw = options_.password;
              return command_on(port, {"SENTINEL", "REPLICAS", master_name}, pw).elements.size() ==
                         1 &&
                     command_on(port, {"SENTINEL", "SENTINELS", master_name}, pw).elements.size() ==
                         2;
            },
            20s))
      throw std::runtime_error("redis_sentinel: sentinels did not discover each other");
}

redis_sentinel::~redis_sentinel() {
  for (pid_t pid : sentinel_pids_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
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
      return command_on(port, args, options_.password);
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
