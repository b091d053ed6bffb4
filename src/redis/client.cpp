#include "redis/client.hpp"

#include <atomic>
#include <mutex>
#include <string>

#include "floodgate/errors.hpp"
#include "redis/connection.hpp"
#include "redis/io_worker.hpp"

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

// The pool: owns the io thread (worker_) and the connections. Calls cross from callers'
// threads through the worker's queue; everything else is touched on the io thread alone.
class client::impl final : public connection_owner,
                           public io_worker_owner,
                           public std::enable_shared_from_this<impl> {
 public:
  impl(redis_endpoint endpoint, const redis_options& options, std::vector<const script*> scripts)
      : config_{endpoint, options, std::move(scripts),
                endpoint.tls ? make_tls_context(options.tls) : tls_context_result{}} {
    connections_.reserve(options.connections);
    for (std::size_t i = 0; i < options.connections; ++i)
      connections_.push_back(std::make_unique<connection>(worker_.context(), config_, *this));
  }

  void start() {
    // Before the thread exists, so nothing else touches them yet: calls submitted from now on
    // find every connection already connecting.
    for (auto& c : connections_) c->start();
    // The thread keeps the pool alive, so it can outlive a client destroyed on this thread.
    worker_.start(shared_from_this());
  }

  void submit(request_ptr r) { worker_.submit(std::move(r)); }

  void shutdown() { worker_.shutdown(); }

  bool healthy() const noexcept {
    return ready_.load(std::memory_order_relaxed) > 0 && !lasting_.load(std::memory_order_relaxed);
  }

  void readiness_changed(connection&, bool ready) override {
    ready_.fetch_add(ready ? 1 : -1, std::memory_order_relaxed);
  }

  void problem(const std::string& why, bool lasting) override {
    std::lock_guard lock(error_mutex_);
    last_error_ = why;
    has_error_.store(true, std::memory_order_relaxed);
    if (lasting) lasting_.store(true, std::memory_order_relaxed);
  }

  void call_succeeded() noexcept override {
    if (!lasting_.load(std::memory_order_relaxed) && !has_error_.load(std::memory_order_relaxed))
      return;  // the common case: one relaxed load per answer
    std::lock_guard lock(error_mutex_);
    last_error_.clear();
    lasting_.store(false, std::memory_order_relaxed);
    has_error_.store(false, std::memory_order_relaxed);
  }

  std::string last_error() const {
    std::lock_guard lock(error_mutex_);
    return last_error_;
  }

  void redispatch(std::vector<request_ptr> requests) override {
    for (auto& r : requests) dispatch(std::move(r));
    flush_all();
  }

  void script_reloaded() noexcept override {
    script_reloads_.fetch_add(1, std::memory_order_relaxed);
  }

  backend_stats stats() const noexcept {
    backend_stats s;
    s.script_reloads = script_reloads_.load(std::memory_order_relaxed);
    return s;
  }

  void dispatch_batch(std::vector<request_ptr>& batch) override {
    for (auto& r : batch) dispatch(std::move(r));
    flush_all();
  }

  void tear_down(std::vector<request_ptr>& out) override {
    for (auto& c : connections_) c->stop(out);
    ready_.store(0, std::memory_order_relaxed);
  }

 private:
  // To the ready connection holding the fewest calls; failing that, to one that is
  // connecting (it may be ready before the call's deadline); failing that, not_connected now.
  void dispatch(request_ptr r) {
    connection* best = nullptr;
    bool best_ready = false;
    for (auto& c : connections_) {
      const auto state = c->current_state();
      if (state != connection::state::ready && state != connection::state::connecting) continue;
      if (c->pending() >= config_.options.max_pending_per_connection) continue;
      const bool ready = state == connection::state::ready;
      if (best == nullptr || (ready && !best_ready) ||
          (ready == best_ready && c->pending() < best->pending())) {
        best = c.get();
        best_ready = ready;
      }
    }
    if (best == nullptr) return r->complete(errc::not_connected, nullptr);
    best->enqueue(std::move(r));
  }

  void flush_all() {
    for (auto& c : connections_) c->flush();
  }

  const connection_config config_;  // before the connections, which refer to it
  io_worker worker_{*this};         // before the connections: its io_context outlives them
  std::vector<std::unique_ptr<connection>> connections_;
  std::atomic<int> ready_{0};
  mutable std::mutex error_mutex_;
  std::string last_error_;               // guarded by error_mutex_
  std::atomic<bool> lasting_{false};     // calls fail for a reason that will not heal itself
  std::atomic<bool> has_error_{false};   // last_error_ is not empty
  std::atomic<std::uint64_t> script_reloads_{0};
};

client::client(redis_endpoint endpoint, const redis_options& options,
               std::vector<const script*> scripts_to_load) {
  validate_options(options);
  impl_ = std::make_shared<impl>(std::move(endpoint), options, std::move(scripts_to_load));
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
