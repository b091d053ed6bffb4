#include "redis/client.hpp"

#include <string>

#include "floodgate/errors.hpp"
#include "redis/node_pool.hpp"

namespace floodgate::redis {

std::error_code error_for(const reply& r) noexcept {
  const auto code = r.error_code();
  if (code == "BUSY") return errc::server_busy;
  if (code == "OOM") return errc::out_of_memory;
  return errc::server_error;
}

void validate_options(const redis_options& o) {
  auto fail = [](const char* what) { throw config_error(std::string("redis_options: ") + what); };
  if (o.connections < 1 || o.connections > 1024) fail("connections must be from 1 to 1024");
  if (o.timeout.count() < 1) fail("timeout must be at least 1 ms");
  if (o.connect_timeout.count() < 1) fail("connect_timeout must be at least 1 ms");
  if (o.reconnect_backoff_min.count() < 1) fail("reconnect_backoff_min must be at least 1 ms");
  if (o.reconnect_backoff_max < o.reconnect_backoff_min)
    fail("reconnect_backoff_max must not be below reconnect_backoff_min");
  // HELLO's reply at connect (~160 bytes) must fit.
  if (o.max_reply_size < 256) fail("max_reply_size must be at least 256 bytes");
  if (o.max_writes_in_flight < 1) fail("max_writes_in_flight must be at least 1");
  if (o.max_batch_items < 1 || o.max_batch_items > 1024)
    fail("max_batch_items must be from 1 to 1024");
  if (o.max_pending_per_connection < 1) fail("max_pending_per_connection must be at least 1");
  if (o.breaker_failures < 1) fail("breaker_failures must be at least 1");
  if (o.breaker_open_for.count() < 1) fail("breaker_open_for must be at least 1 ms");
}

// The one node's router: every call goes to it, and what it answers is the answer.
namespace {

class single_client final : public pool_client {
 public:
  single_client(const redis_endpoint& endpoint, const redis_options& options, script_set scripts)
      : pool_client(endpoint.tls, options, std::move(scripts)), node_(pool_.node_for(endpoint)) {}

  bool healthy() const noexcept override {
    const auto& h = pool_.health();
    return node_->ready() > 0 && h.breakers_closed() && !h.lasting();
  }

  void route(request_ptr r, bool) override { pool_.send(std::move(r), *node_); }

 private:
  node* const node_;  // the pool's only node: never retired
};

}  // namespace

std::unique_ptr<transport> make_client(const redis_endpoint& endpoint, const redis_options& options,
                                       script_set scripts) {
  validate_options(options);
  return start_client<single_client>(endpoint, options, std::move(scripts));
}

}  // namespace floodgate::redis
