// One Redis server as every client sees it (node_pool.hpp holds them: client.hpp's one server,
// cluster_client.hpp's nodes, sentinel_client.hpp's primary): its pipelined connections,
// the least-loaded pick among them, its circuit breaker (breaker.hpp), and its problems in
// the server's words (pool_health.hpp), so health, errors and stats read the same on every
// topology.
//
//   node n{pool, config};   // pool: node_pool.hpp, which hears of it on its io thread
//   n.start();
//   bool probe = false;
//   connection* c = n.admit(probe) ? n.pick() : nullptr;   // null: fail not_connected
//   ... when the call completes: n.finished(call, ec);     // request::finish does it
//
// Internal and Asio-based like connection.hpp; everything runs on the client's io thread,
// but ready() and breaker state are also read elsewhere through pool_health.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "redis/breaker.hpp"
#include "redis/connection.hpp"
#include "redis/pool_health.hpp"
#include "redis/timer.hpp"

namespace floodgate::redis {

class node_pool;

class node final {
 public:
  // Connecting on `pool`'s io thread, reporting to its router and health.
  node(node_pool& pool, connection_config config);
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  // Starts the connections not started yet.
  void start();
  // Stops every connection, handing back what they hold, and takes the node out of the
  // pool's health: its problem and its open breaker. Once.
  void stop(std::vector<request_ptr>& out);
  // Takes the node out of the pool's health (its problem, its open breaker) and stops
  // reporting, while its connections finish the calls they hold (a retired primary). Once;
  // stop() does it too.
  void leave();

  // The ready connection holding the fewest calls; failing that, a connecting one (it may be
  // ready before the call's deadline); failing that, null.
  connection* pick();
  // Whether the breaker lets a call go now (`probe`: it is the half-open breaker's probe).
  bool admit(bool& probe);
  // The admitted call was not sent after all.
  void not_sent(bool probe) noexcept;
  // A call admitted here (request::observer) completed with `ec`, told by request::finish:
  // timeout and not_connected are "no answer" to the breaker; an answer without error clears
  // the node's problem, unless the call was the node's own PING (request::breaker_ping).
  void finished(const request& r, std::error_code ec) noexcept;

  int ready() const noexcept { return ready_.load(std::memory_order_relaxed); }
  bool breaker_closed() const noexcept { return breaker_.closed(); }
  // Some connection holds calls.
  bool busy() const noexcept;
  bool owns(const connection* c) const noexcept;
  const connection_config& config() const noexcept { return config_; }
  const std::string& name() const noexcept { return name_; }

  // --- what its connections tell it (connection.hpp) ---
  // One of them became ready or stopped being ready.
  void readiness_changed(bool ready);
  // Calls a connection held but never wrote, when it lost its socket: to be placed on another
  // connection (or the same, reconnecting), or failed.
  void redispatch(std::vector<request_ptr> requests);
  // A script met NOSCRIPT, or a function was missing, and is being loaded again.
  void script_reloaded() noexcept;
  // Why connecting failed (the server's own words for a refused handshake: WRONGPASS, a bad db
  // index, a Redis too old), or why a call failed ("call: ...") in a way that will not heal by
  // itself (`lasting`: NOPERM, an unknown command). Told with the node's name, for logs and
  // readiness.
  void problem(const std::string& why, bool lasting);
  // A call was answered without an error: whatever was lasting has been fixed.
  void call_succeeded() noexcept;

 private:
  const connection_config config_;  // before the connections, which refer to it
  const std::string name_;
  node_pool& pool_;
  pool_health& health_;  // pool_'s
  std::vector<std::unique_ptr<connection>> connections_;
  std::atomic<int> ready_{0};
  breaker breaker_;
  // While the breaker is open, the node probes by itself (PING) when its time is up: an
  // instance whose /readyz is 503 gets no traffic from a load balancer, so a breaker that
  // only a caller's call could close would keep it out for ever.
  timer probe_timer_;
  bool pinging_ = false;  // that PING is on its way
  void arm_probe();
  void send_probe();
  void clear_problem();

  bool has_problem_ = false;  // health_ holds one for this node
  bool problem_lasting_ = false;
  bool answered_ = false;  // since it, a reply that was no error: the next finished() clears
  bool stopped_ = false;
};

}  // namespace floodgate::redis
