// A real Sentinel set-up for tests: a primary and one replica (redis_server) watched by three
// sentinels (redis-server --sentinel) on free loopback ports, with short timeouts.
//
//   floodgate::test::redis_sentinel s;                 // replica synced, sentinels agree
//   floodgate::limiter l{s.url()};                      // redis+sentinel://127.0.0.1:P,.../fg
//   s.failover();                                       // SENTINEL FAILOVER fg
//   s.wait_primary_port(s.node(1).port(), 10s);
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {

class redis_sentinel {
 public:
  static constexpr const char* master_name = "fg";
  // The sentinels' settings: a primary silent this long is down (down-after-milliseconds), and
  // a failover not done within failover_timeout is given up (failover-timeout).
  static constexpr std::chrono::milliseconds down_after{1000};
  static constexpr std::chrono::milliseconds failover_timeout{5000};
  // After a failover, the longest until the old primary (still up) is made a replica: Sentinel
  // asks it for INFO every 10 s, and converts it once it has reported itself primary for four
  // 2-s publish periods (sentinel.c).
  static constexpr std::chrono::milliseconds demotion_limit =
      failover_timeout + std::chrono::milliseconds(10'000 + 4 * 2'000);
  // How long failover() asks again while SENTINEL FAILOVER is refused (-NOGOODSLAVE), and the
  // longest until a client has switched once it is done: the failover (given up after
  // failover_timeout), then the client's 1 s recheck if it missed the sentinels' message.
  static constexpr std::chrono::milliseconds failover_asked_within{10'000};
  static constexpr std::chrono::milliseconds switched_limit =
      failover_timeout + std::chrono::milliseconds(1'000);
  // A limit a load admitting `per_second` cannot spend before the failover is asked, done and
  // switched to: what a failover test's key needs so that the limit is not what it measures.
  static constexpr std::int64_t limit_outlasting_a_failover(double per_second) {
    return static_cast<std::int64_t>(
        per_second * std::chrono::duration<double>(failover_asked_within + switched_limit).count());
  }

  struct options {
    std::string password;  // non-empty: the sentinels require it (requirepass, sentinel-pass)
    // Set: every process also serves TLS with these certificates (client certificates
    // required), replication and the sentinels' own links go over TLS, and tls_url() names
    // the sentinels' TLS ports. The plain ports stay for the fixture's own commands.
    const tls_certificates* tls = nullptr;
  };

  redis_sentinel() : redis_sentinel(options{}) {}
  explicit redis_sentinel(options opts);
  ~redis_sentinel();
  redis_sentinel(const redis_sentinel&) = delete;
  redis_sentinel& operator=(const redis_sentinel&) = delete;

  std::string url() const;
  // rediss+sentinel://127.0.0.1:T,.../fg?<query> (options.tls only).
  std::string tls_url(const std::string& query) const;
  const std::vector<std::uint16_t>& sentinel_ports() const { return sentinel_ports_; }
  // 0: the first primary, 1: its replica.
  redis_server& node(int i) { return *nodes_.at(static_cast<std::size_t>(i)); }
  // Node i's TLS port (options.tls only).
  std::uint16_t tls_port(int i) const { return tls_ports_.at(static_cast<std::size_t>(i)); }
  // Runs a command on the first sentinel that answers.
  reply sentinel_command(const std::vector<std::string>& args) const;
  // SENTINEL FAILOVER, asked again for up to `within` while refused: right after start-up a
  // sentinel may not yet count the replica as promotable (-NOGOODSLAVE). The last reply.
  reply failover(std::chrono::milliseconds within = std::chrono::seconds(10)) const;
  // The port the sentinels name as primary now (0 if none answers).
  int primary_port() const;
  // Waits until the sentinels name `port` (a node's plain or TLS port) as primary and it says
  // it is one.
  bool wait_primary_port(int port, std::chrono::milliseconds limit);

 private:
  void start_sentinel(int i, std::uint16_t primary_port);

  options options_;
  std::string dir_;
  std::vector<std::unique_ptr<redis_server>> nodes_;
  std::vector<std::uint16_t> sentinel_ports_;
  std::vector<std::uint16_t> tls_ports_;  // nodes', then sentinels'; options.tls only
  std::vector<child_process> sentinels_;
};

}  // namespace floodgate::test
