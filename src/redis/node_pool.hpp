// The one pool of Redis nodes under every topology's client (client.cpp: one server;
// cluster_client.cpp: the slots' masters; sentinel_client.cpp: the primary the sentinels
// name): one io thread, nodes by address (node.hpp), the one waiting room for calls held back
// until a time (TRYAGAIN's backoff, a redirection on the next turn) or until taken (READONLY
// calls waiting for a new primary), and retiring of nodes that left. A topology is a
// pool_client: where a call goes, and what its node's answer means.
//
//   class my_client final : public pool_client {   // pool_: its node_pool
//     void route(request_ptr r, bool fresh) override {
//       pool_.send(std::move(r), *pool_.node_for(ep));   // or errc::not_connected
//     }
//     bool healthy() const noexcept override;
//   };
//   return start_client<my_client>(...);   // the pool's thread keeps the client alive
//   t->submit(std::move(call));            // any thread: routed on the io thread
//
// Internal and Asio-based like connection.hpp. Everything but submit(), shutdown() and the
// health reads runs on the io thread. Calls cross over to it through one queue (one lock,
// held only to push or swap).
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "redis/breaker.hpp"
#include "redis/connection.hpp"
#include "redis/node.hpp"
#include "redis/pool_health.hpp"
#include "redis/timer.hpp"
#include "redis/transport.hpp"

namespace floodgate::redis {

class pool_client;

class node_pool final {
 public:
  using clock = request::clock;

  // `tls`: for every node whose endpoint says TLS (an error there fails their connects).
  node_pool(pool_client& router, const redis_options& options, script_set scripts,
            tls_context_result tls);
  node_pool(const node_pool&) = delete;
  node_pool& operator=(const node_pool&) = delete;

  boost::asio::io_context& context() noexcept { return io_; }
  pool_client& router() noexcept { return router_; }
  const redis_options& options() const noexcept { return options_; }
  const tls_context_result& tls() const noexcept { return tls_; }
  pool_health& health() noexcept { return health_; }
  const pool_health& health() const noexcept { return health_; }

  // Starts the nodes made so far, then the thread (holding `keep_alive`, the client, until it
  // exits, so the client outlives a shutdown() called from one of its own completions), then
  // the router on it.
  void start(std::shared_ptr<void> keep_alive);
  // Any thread: routed on the io thread (pool_client::route, fresh). Once shutting down,
  // completed inline with shutting_down: the io thread may be gone.
  void submit(request_ptr r);
  // Any thread, once, after start() (a thread still joinable would terminate): every call
  // held completes with shutting_down. Returns after the teardown, or, when called on the io
  // thread, at once: the teardown then runs when the current handler returns.
  void shutdown();

  // --- io thread ---------------------------------------------------------------------------

  // The node at `ep`'s address (its credentials, db and TLS are `ep`'s when it is made),
  // connecting from now on.
  node* node_for(const redis_endpoint& ep);
  // Admitted by `n`'s breaker and queued on its least-loaded connection (written at flush()).
  // False when refused (the breaker is open, no connection can take it): `r` has completed
  // with errc::not_connected.
  bool send(request_ptr r, node& n);
  // Writes what send() queued.
  void flush();

  // The waiting room: `r` routed again at `until` (until_taken: only by take_held()), answered
  // errc::timeout at its deadline if that comes first.
  static constexpr clock::time_point until_taken = clock::time_point::max();
  void hold(request_ptr r, clock::time_point until);
  // Every call held, oldest first.
  std::vector<request_ptr> take_held();

  // Takes `n` out of the pool: its address is free for a new node, its problem and open
  // breaker leave the health, calls held for it are routed afresh. Stopped now if it holds no
  // calls, else once it does not or `stop_by` passes (sweep()); freed a grace time later.
  void retire(node& n, clock::time_point stop_by);
  // Stops retired nodes that are due, frees those past their grace.
  void sweep();

  const std::map<std::string, std::unique_ptr<node>>& nodes() const noexcept { return nodes_; }
  std::uint64_t retired_count() const noexcept { return retired_count_; }
  bool torn_down() const noexcept { return torn_down_; }

  // Calls routed again (pool_client::route, not fresh), then flush(): those a node's connection
  // gave back unsent (node::redispatch), or due in the waiting room.
  void redispatch(std::vector<request_ptr> requests);

 private:
  struct retired_node {
    clock::time_point stop_by, free_at;
    std::unique_ptr<node> n;
    bool stopped = false;
  };
  struct held_call {
    request_ptr call;
    clock::time_point until;
  };

  // One timer for the waiting room, at the earliest `until` or deadline of a call held.
  void arm_room(clock::time_point wake);
  void wake_room();
  void stop_retired(retired_node& r);
  // The calls submitted since the last drain, routed fresh.
  void drain();
  // Once, after shutdown(): stops the router, the room and the nodes, then the io_context,
  // and completes every call they held, and those never routed, with shutting_down.
  void tear_down();

  pool_client& router_;
  const redis_options options_;
  const script_set scripts_;
  const tls_context_result tls_;
  pool_health health_;  // before the nodes, which report to it
  // Before the nodes and the room: the io_context outlives them.
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;

  std::mutex mutex_;
  std::vector<request_ptr> incoming_;  // guarded by mutex_: submitted, not routed yet
  bool drain_posted_ = false;          // guarded by mutex_
  bool stopping_ = false;              // guarded by mutex_
  std::vector<request_ptr> draining_;  // io thread
  std::map<std::string, std::unique_ptr<node>> nodes_;  // by endpoint_label()
  std::vector<retired_node> retired_;
  std::vector<connection*> dirty_;  // queued on since the last flush()
  std::vector<held_call> held_;     // the waiting room, oldest first
  timer room_timer_;
  std::uint64_t retired_count_ = 0;
  bool started_ = false;  // nodes made from now on start connecting at once
  bool torn_down_ = false;
};

// A topology's client: a router over its own pool, which the backend holds as a transport
// (transport.hpp). Health is what the topology last said (healthy_) while no node fails for a
// lasting reason; errors and stats are the pool's; a topology may say more of each.
class pool_client : public transport::client, public std::enable_shared_from_this<pool_client> {
 public:
  void submit(request_ptr r) override { pool_.submit(std::move(r)); }
  void shutdown() override { pool_.shutdown(); }
  std::string last_error() const override { return pool_.health().last_error(); }
  backend_stats stats() const noexcept override { return pool_.health().stats(); }
  bool healthy() const noexcept override {
    return healthy_.load(std::memory_order_relaxed) && !pool_.health().lasting();
  }

  // Starts the pool's thread, which holds the client until it exits.
  void run() { pool_.start(shared_from_this()); }

  // --- the topology's decisions over the pool (io thread) ---
  // Send `r` on (node_pool::send) or answer it. `fresh`: a caller just submitted it; else it
  // comes again: given back unsent by a connection (released from its node already), or due
  // in the waiting room.
  virtual void route(request_ptr r, bool fresh) = 0;
  // Once, on the io thread, before any call is routed.
  virtual void start() {}
  // Once, at teardown, before the pool stops its nodes and empties the waiting room: cancel
  // timers, close what the router owns itself.
  virtual void stop() {}
  // One of the node's connections became ready or stopped being ready.
  virtual void readiness_changed(node& /*n*/, bool /*ready*/) {}
  // The node's breaker opened or closed.
  virtual void breaker_changed(node& /*n*/, breaker::change /*c*/) {}
  // Whether an error reply (node::problem's "call: ..." text) is the topology routing the call
  // (a Cluster's MOVED), not a problem of its node's to report.
  virtual bool routing_reply(std::string_view /*error*/) const noexcept { return false; }

 protected:
  // `tls`: whether the topology's nodes speak TLS (rediss://).
  pool_client(bool tls, const redis_options& options, script_set scripts)
      : pool_(*this, options, std::move(scripts),
              tls ? make_tls_context(options.tls) : tls_context_result{}) {}

  node_pool pool_;  // before the topology's timers and sockets: its io_context outlives them
  std::atomic<bool> healthy_{false};
};

// Makes and runs topology `client` (its run(): pool_client's, or one that also waits) and
// hands it to the backend.
template <class client, class... args>
std::unique_ptr<transport> start_client(args&&... a) {
  auto c = std::make_shared<client>(std::forward<args>(a)...);
  c->run();
  return std::make_unique<transport>(std::move(c));
}

}  // namespace floodgate::redis
