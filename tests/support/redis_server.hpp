// A real redis-server for tests: started on a free loopback port in a scratch directory,
// killed and cleaned up when the fixture goes away.
//
//   floodgate::test::redis_server redis;              // started and answering PING
//   floodgate::limiter limiter{redis.url()};
//   redis.command({"SET", "k", "v"});                 // direct access, hiredis sync
//   redis.pause(); ...; redis.resume();               // SIGSTOP / SIGCONT
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "child_process.hpp"

namespace floodgate::test {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to 0, read, close).
std::uint16_t free_port();

// A port for a Redis Cluster node: at most 55535, and free together with its bus port
// (port + 10000). The kernel's ephemeral range reaches 60999, so free_port() alone hands out
// ports a cluster node refuses to start on.
std::uint16_t free_cluster_port();

// A reply, flattened for assertions.
struct reply {
  enum kind_t { string, status, number, nil, error, array } kind = nil;
  std::string str;           // string, status, error
  long long integer = 0;     // number
  std::vector<reply> elements;  // array
};

// Runs one command on a fresh connection to 127.0.0.1:port (1 s timeout), after AUTH when a
// password is given; throws on connection failure.
reply command_at(std::uint16_t port, const std::vector<std::string>& args,
                 const std::string& password = {});

class redis_server {
 public:
  struct options {
    bool enable_debug = true;             // DEBUG SLEEP etc. (off by default in Redis 7)
    std::vector<std::string> extra_args;  // more "--name value" arguments
    bool cluster_port = false;            // pick the port with free_cluster_port()
  };

  redis_server() : redis_server(options{}) {}
  explicit redis_server(options opts);
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return process_.pid(); }

  void pause();    // SIGSTOP: the socket stays open, nothing answers
  void resume();   // SIGCONT
  void kill();     // SIGKILL and reap
  void restart();  // kill (if running) and start again on the same port; waits for PING

  // Runs one command on a fresh connection (1 s timeout); throws on connection failure.
  reply command(const std::vector<std::string>& args) const;

 private:
  void start();

  options options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  child_process process_;
};

}  // namespace floodgate::test
