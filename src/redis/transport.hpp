// What the Redis backend sends its calls through: one server (client.hpp), a Redis Cluster
// (cluster_client.hpp) or a primary found through Sentinel (sentinel_client.hpp). Each is a
// router over one node pool (node_pool.hpp), so each completes every request exactly once, as
// client.hpp describes, and reports health, errors and stats the same way (node.hpp).
//
//   std::unique_ptr<transport> t = make_cluster_client(seeds, options, scripts);
//   t->submit(std::move(r));   // any thread
//   t.reset();                 // shuts the client down: what it holds completes shutting_down
#pragma once

#include <memory>
#include <string>

#include "floodgate/backend.hpp"
#include "floodgate/options.hpp"
#include "redis/request.hpp"

namespace floodgate::redis {

class transport final {
 public:
  // A topology's client: shared with its pool's io thread, which keeps it alive while it runs
  // (so it may outlive a transport destroyed from one of its own completions).
  class client {
   public:
    virtual ~client() = default;
    // From any thread.
    virtual void submit(std::unique_ptr<request> r) = 0;
    // Once, from the transport's destructor (node_pool::shutdown).
    virtual void shutdown() = 0;
    virtual bool healthy() const noexcept = 0;
    virtual std::string last_error() const = 0;
    virtual backend_stats stats() const noexcept = 0;
  };

  explicit transport(std::shared_ptr<client> c) : client_(std::move(c)) {}
  ~transport() { client_->shutdown(); }
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  // From any thread.
  void submit(std::unique_ptr<request> r) { client_->submit(std::move(r)); }
  // True while calls can be served (a cluster: every slot's master is reachable).
  bool healthy() const noexcept { return client_->healthy(); }
  // Counters for metrics: script reloads and breakers everywhere; redirections, failovers and
  // nodes where the topology has them.
  backend_stats stats() const noexcept { return client_->stats(); }
  // As backend::last_error.
  std::string last_error() const { return client_->last_error(); }

 private:
  std::shared_ptr<client> client_;
};

// Throws config_error for options that cannot work (no connections, a zero timeout, ...).
void validate_options(const redis_options& o);
// Throws config_error when TLS with `o` cannot work (a file missing or unreadable, a key that
// does not match its certificate), so rediss:// fails at start-up rather than at each connect.
void validate_tls_options(const tls_options& o);

}  // namespace floodgate::redis
