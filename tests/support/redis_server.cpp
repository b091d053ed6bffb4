#include "redis_server.hpp"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

namespace floodgate::test {

using namespace std::chrono_literals;

namespace {

reply flatten(const redisReply* r) {
  reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.kind = reply::string; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_STATUS: out.kind = reply::status; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.kind = reply::error; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_INTEGER: out.kind = reply::number; out.integer = r->integer; break;
    case REDIS_REPLY_ARRAY:
      out.kind = reply::array;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(flatten(r->element[i]));
      break;
    default: out.kind = reply::nil; break;
  }
  return out;
}

// Binds 127.0.0.1:port (0 = the kernel picks) and closes again; the port bound, or 0.
std::uint16_t try_bind(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_port: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

}  // namespace

std::uint16_t free_port() {
  const auto port = try_bind(0);
  if (port == 0) throw std::runtime_error("free_port: bind failed");
  return port;
}

std::uint16_t free_cluster_port() {
  static thread_local std::mt19937 random{std::random_device{}()};
  std::uniform_int_distribution<int> pick(20000, 55535);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(random));
    if (try_bind(port) == port && try_bind(port + 10000) == port + 10000) return port;
  }
  throw std::runtime_error("free_cluster_port: no free port pair in 1000 tries");
}

redis_server::redis_server(options opts)
    : options_(std::move(opts)), dir_(make_temp_dir("floodgate-redis-")) {
  // A port can be taken between free_port() and redis binding it: try a few.
  for (int attempt = 0;; ++attempt) {
    port_ = options_.cluster_port ? free_cluster_port() : free_port();
    try {
      start();
      return;
    } catch (const std::exception&) {
      if (attempt == 4) throw;
    }
  }
}

redis_server::~redis_server() {
  kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void redis_server::start() {
  std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_), "--bind",
                                   "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir_,
                                   "--logfile", dir_ + "/redis.log", "--daemonize", "no"};
  if (options_.enable_debug) args.insert(args.end(), {"--enable-debug-command", "local"});
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());

  // Its output to a file, not the test's stdout: a test that dies (an ASan abort) leaves the
  // server running, and an inherited pipe would keep ctest waiting for it until its timeout.
  process_ = child_process(args, {.output = dir_ + "/stdout.log"});
  const auto started = process_.wait_ready([&] { return command({"PING"}).str == "PONG"; }, 10s);
  if (started == child_process::readiness::ready) return;
  process_.kill();
  // The log's last lines say why (a port taken, a bad argument), and the directory goes away.
  auto log = read_file(dir_ + "/redis.log");
  if (log.size() > 800) log = "..." + log.substr(log.size() - 800);
  throw std::runtime_error(std::string(started == child_process::readiness::exited
                                           ? "redis_server: redis-server exited at start"
                                           : "redis_server: no PONG within 10 s") +
                           " (port " + std::to_string(port_) + "):\n" + log);
}

void redis_server::pause() {
  process_.signal(SIGSTOP);
}

void redis_server::resume() {
  process_.signal(SIGCONT);
}

void redis_server::kill() {
  process_.kill();
}

void redis_server::restart() {
  kill();
  start();
}

reply redis_server::command(const std::vector<std::string>& args) const {
  return command_at(port_, args);
}

reply command_at(std::uint16_t port, const std::vector<std::string>& args,
                 const std::string& password) {
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!c || c->err) {
    std::string err = c ? c->errstr : "allocation failed";
    if (c) redisFree(c);
    throw std::runtime_error("redis command on port " + std::to_string(port) + ": connect: " + err);
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
  if (!r) {
    std::string err = c->errstr;
    redisFree(c);
    throw std::runtime_error("redis command on port " + std::to_string(port) + ": " + err);
  }
  reply out = flatten(r);
  freeReplyObject(r);
  redisFree(c);
  return out;
}

}  // namespace floodgate::test
