#include "redis/client.hpp"

#include <string>

#include "floodgate/errors.hpp"
#include "redis/connection.hpp"
#include "redis/io_worker.hpp"
#include "redis/node.hpp"
#include "redis/pool_health.hpp"

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

// The pool: owns the io thread (worker_) and the one node. Calls cross from callers' threads
// through the worker's queue; everything else is touched on the io thread alone.
class client::impl final : public node_owner,
                           public io_worker_owner,
                           public std::enable_shared_from_this<impl> {
 public:
  impl(redis_endpoint endpoint, const redis_options& options, script_set scripts)
      : node_(worker_.context(),
              {endpoint, options, std::move(scripts),
               endpoint.tls ? make_tls_context(options.tls) : tls_context_result{}},
              *this, health_) {}

  void start() {
    // Before the thread exists, so nothing else touches them yet: calls submitted from now on
    // find every connection already connecting.
    node_.start();
    // The thread keeps the pool alive, so it can outlive a client destroyed on this thread.
    worker_.start(shared_from_this());
  }

  void submit(request_ptr r) { worker_.submit(std::move(r)); }

  void shutdown() { worker_.shutdown(); }

  bool healthy() const noexcept {
    return node_.ready() > 0 && health_.breakers_closed() && !health_.lasting();
  }

  std::string last_error() const { return health_.last_error(); }

  backend_stats stats() const noexcept { return health_.stats(); }

  void readiness_changed(node&, bool) override {}

  void redispatch(node&, std::vector<request_ptr> requests) override {
    for (auto& r : requests) dispatch(std::move(r));
    flush();
  }

  void dispatch_batch(std::vector<request_ptr>& batch) override;

  void tear_down(std::vector<request_ptr>& out) override { node_.stop(out); }

 private:
  // To the node's least loaded connection, unless its breaker is open; else not_connected now.
  void dispatch(request_ptr r);
  void flush();

  pool_health health_;       // before the node, which reports to it
  io_worker worker_{*this};  // before the node: its io_context outlives the connections
  node node_;
};

void client::impl::dispatch_batch(std::vector<request_ptr>& batch) {
  for (auto& r : batch) dispatch(std::move(r));
  flush();
}

// The node observes each call it admits (request::observer), so its outcome reaches the
// breaker before the caller.
void client::impl::dispatch(request_ptr r) {
  if (r->observer != nullptr) {  // given back unsent by a connection: admitted again
    node_.not_sent(r->probe);
    r->observer = nullptr;
    r->probe = false;
  }
  bool probe = false;
  connection* to = node_.admit(probe) ? node_.pick() : nullptr;
  if (to == nullptr) {
    node_.not_sent(probe);
    // Through its router, if any: refused here is an outcome a Sentinel acts on.
    return request::finish(std::move(r), errc::not_connected, nullptr);
  }
  r->observer = &node_;
  r->probe = probe;
  to->enqueue(std::move(r));
}

void client::impl::flush() {
  node_.flush();
}

client::client(redis_endpoint endpoint, const redis_options& options, script_set scripts) {
  validate_options(options);
  impl_ = std::make_shared<impl>(std::move(endpoint), options, std::move(scripts));
  impl_->start();
}

client::~client() {
  impl_->shutdown();
}

void client::submit(std::unique_ptr<request> r) {
  impl_->submit(std::move(r));
}

bool client::healthy() const noexcept {
  return impl_->healthy();
}

std::string client::last_error() const {
  return impl_->last_error();
}

backend_stats client::stats() const noexcept {
  return impl_->stats();
}

}  // namespace floodgate::redis
