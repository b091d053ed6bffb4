// What the Redis backend sends its calls through: one server (client.hpp), a Redis Cluster
// (cluster_client.hpp) or a primary found through Sentinel (sentinel_client.hpp). Each
// completes every request exactly once, as client.hpp describes, and reports health, errors
// and stats the same way (node.hpp).
#pragma once

#include <memory>

#include "floodgate/backend.hpp"
#include "floodgate/options.hpp"
#include "redis/request.hpp"

namespace floodgate::redis {

class transport {
 public:
  virtual ~transport() = default;
  // From any thread.
  virtual void submit(std::unique_ptr<request> r) = 0;
  // True while calls can be served (a cluster: every slot's master is reachable).
  virtual bool healthy() const noexcept = 0;
  // Counters for metrics: script reloads and breakers everywhere; redirections, failovers and
  // nodes where the topology has them.
  virtual backend_stats stats() const noexcept { return {}; }
  // As backend::last_error.
  virtual std::string last_error() const { return {}; }
};

// Throws config_error for options that cannot work (no connections, a zero timeout, ...).
void validate_options(const redis_options& o);
// Throws config_error when TLS with `o` cannot work (a file missing or unreadable, a key that
// does not match its certificate), so rediss:// fails at start-up rather than at each connect.
void validate_tls_options(const tls_options& o);

}  // namespace floodgate::redis
