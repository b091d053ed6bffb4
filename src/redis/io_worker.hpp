// The thread a Redis client runs on: an io_context, the thread running it, and the queue by
// which calls cross over from callers' threads (one lock, held only to push or swap). The
// owner (node_pool.hpp) does the rest on that thread: it is handed each batch of submitted
// calls, and asked once to tear down.
//
//   class node_pool : public io_worker_owner {
//     void start(std::shared_ptr<void> client) { worker_.start(std::move(client)); }
//     void submit(request_ptr r) { worker_.submit(std::move(r)); }
//     void dispatch_batch(std::vector<request_ptr>& batch) override;  // to the connections
//     void tear_down(std::vector<request_ptr>& out) override;         // stop the connections
//     io_worker worker_{*this};  // before what uses worker_.context(): destroyed after it
//   };
//   client::~client() { impl_->shutdown(); }  // calls worker_.shutdown()
//
// Internal and Asio-based, like connection.hpp; header-only so that no source file beyond
// those already paying for Asio has to include it.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "floodgate/errors.hpp"
#include "redis/request.hpp"

namespace floodgate::redis {

using request_ptr = std::unique_ptr<request>;

// The client's side of its io_worker. Both run on the io thread.
class io_worker_owner {
 public:
  // Calls submitted since the last batch, in order: take each one.
  virtual void dispatch_batch(std::vector<request_ptr>& batch) = 0;
  // Once, after shutdown(): stop everything and move every call still held into `out`, which
  // holds the calls never dispatched. The worker then stops the io_context and completes them
  // all with shutting_down, holding no lock.
  virtual void tear_down(std::vector<request_ptr>& out) = 0;

 protected:
  ~io_worker_owner() = default;
};

class io_worker {
 public:
  explicit io_worker(io_worker_owner& owner) : owner_(owner), work_(io_.get_executor()) {}
  io_worker(const io_worker&) = delete;
  io_worker& operator=(const io_worker&) = delete;

  boost::asio::io_context& context() noexcept { return io_; }

  // The thread holds `keep_alive` (the owner) until it exits, so the owner outlives a
  // shutdown() called from one of its own completions.
  void start(std::shared_ptr<void> keep_alive) {
    thread_ = std::thread([this, keep_alive = std::move(keep_alive)] { io_.run(); });
  }

  // Any thread. Once shutting down, completes `r` inline: the io thread may be gone.
  void submit(request_ptr r) {
    bool post = false;
    {
      std::lock_guard lock(mutex_);
      if (!stopping_) {
        incoming_.push_back(std::move(r));
        post = !std::exchange(drain_posted_, true);
      }
    }
    if (r) return r->complete(errc::shutting_down, nullptr);
    if (post) boost::asio::post(io_, [this] { drain(); });
  }

  // Once, after start() and before destruction (a thread still joinable would terminate).
  // Returns after the teardown, or, when called on the io thread, at once: the teardown then
  // runs when the current handler returns.
  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    // [this] suffices: only the teardown stops the io_context, so the thread (holding the
    // owner) is still running when it runs.
    boost::asio::post(io_, [this] { tear_down(); });
    if (std::this_thread::get_id() == thread_.get_id()) {
      thread_.detach();  // a thread cannot join itself; it exits after the teardown
      return;
    }
    thread_.join();
  }

 private:
  void drain() {
    {
      std::lock_guard lock(mutex_);
      draining_.swap(incoming_);
      drain_posted_ = false;
    }
    owner_.dispatch_batch(draining_);
    draining_.clear();
  }

  void tear_down() {
    std::vector<request_ptr> all;
    {
      std::lock_guard lock(mutex_);
      all.swap(incoming_);
    }
    owner_.tear_down(all);
    work_.reset();
    io_.stop();
    for (auto& r : all) r->complete(errc::shutting_down, nullptr);
  }

  io_worker_owner& owner_;
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;

  std::mutex mutex_;
  std::vector<request_ptr> incoming_;  // guarded by mutex_
  bool drain_posted_ = false;          // guarded by mutex_
  bool stopping_ = false;              // guarded by mutex_
  std::vector<request_ptr> draining_;  // io thread

  std::thread thread_;
};

}  // namespace floodgate::redis
