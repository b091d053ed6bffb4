#include "redis/node_pool.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>

#include "floodgate/errors.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

using namespace std::chrono_literals;

namespace {

// A retired node is kept (stopped, no socket) this long before it is freed, so callbacks of
// operations cancelled on its connections have long run.
constexpr auto retired_grace = 60s;

}  // namespace

node_pool::node_pool(pool_router& router, const redis_options& options, script_set scripts,
                     tls_context_result tls)
    : router_(router),
      options_(options),
      scripts_(std::move(scripts)),
      tls_(std::move(tls)),
      work_(io_.get_executor()),
      room_(
          io_, [this](std::vector<request_ptr>& due) { route_all(due); },
          [](std::vector<request_ptr>& late) {
            // Past its deadline while held: it is not sent again, so nothing follows.
            for (auto& c : late) c->complete(errc::timeout, nullptr);
          }) {}

void node_pool::start(std::shared_ptr<void> keep_alive) {
  // Before the thread exists, so nothing else touches them yet: calls submitted from now on
  // find every connection already connecting.
  for (auto& [name, n] : nodes_) n->start();
  started_ = true;
  thread_ = std::thread([this, keep_alive = std::move(keep_alive)] { io_.run(); });
  boost::asio::post(io_, [this] { router_.start(); });
}

void node_pool::submit(request_ptr r) {
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

void node_pool::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  // [this] suffices: only the teardown stops the io_context, so the thread (holding the
  // client, which owns the pool) is still running when it runs.
  boost::asio::post(io_, [this] { tear_down(); });
  if (std::this_thread::get_id() == thread_.get_id()) {
    thread_.detach();  // a thread cannot join itself; it exits after the teardown
    return;
  }
  thread_.join();
}

node* node_pool::node_for(const redis_endpoint& ep) {
  auto& slot = nodes_[endpoint_label(ep)];
  if (!slot) {
    slot = std::make_unique<node>(*this, connection_config{ep, options_, scripts_, tls_});
    if (started_) slot->start();
  }
  return slot.get();
}

// The node observes each call it admits (request::observer), so its outcome reaches the
// breaker before the router and the caller.
bool node_pool::send(request_ptr r, node& n) {
  bool probe = false;
  connection* to = n.admit(probe) ? n.pick() : nullptr;
  if (to == nullptr) {
    n.not_sent(probe);
    r->complete(errc::not_connected, nullptr);
    return false;
  }
  r->observer = &n;
  r->probe = probe;
  to->enqueue(std::move(r));
  if (std::find(dirty_.begin(), dirty_.end(), to) == dirty_.end()) dirty_.push_back(to);
  return true;
}

void node_pool::flush() {
  for (connection* c : dirty_) c->flush();
  dirty_.clear();
}

void node_pool::retire(node& n, clock::time_point stop_by) {
  const auto it = nodes_.find(n.name());
  if (it == nodes_.end() || it->second.get() != &n) return;
  n.leave();  // its problem and open breaker are no longer the pool's
  room_.for_each([&n](request& r) {
    if (r.route.target == &n) r.route.target = nullptr;  // routed afresh
  });
  retired_.push_back({stop_by, clock::now() + retired_grace, std::move(it->second)});
  nodes_.erase(it);
  ++retired_count_;
  sweep();
}

void node_pool::stop_retired(retired_node& r) {
  std::erase_if(dirty_, [&r](connection* c) { return r.n->owns(c); });
  std::vector<request_ptr> left;
  r.n->stop(left);
  r.stopped = true;
  // Held past stop_by: every deadline has passed (stop_by is at least the call timeout).
  for (auto& c : left) c->complete(errc::timeout, nullptr);
}

void node_pool::sweep() {
  const auto now = clock::now();
  for (auto& r : retired_)
    if (!r.stopped && (!r.n->busy() || r.stop_by <= now)) stop_retired(r);
  std::erase_if(retired_, [now](const retired_node& r) { return r.stopped && r.free_at <= now; });
}

void node_pool::redispatch(std::vector<request_ptr> requests) {
  for (auto& r : requests) {
    if (auto* was = static_cast<node*>(r->observer)) {  // admitted, never sent
      was->not_sent(r->probe);
      r->observer = nullptr;
      r->probe = false;
    }
    router_.route(std::move(r), false);
  }
  flush();
}

void node_pool::drain() {
  {
    std::lock_guard lock(mutex_);
    draining_.swap(incoming_);
    drain_posted_ = false;
  }
  for (auto& r : draining_) router_.route(std::move(r), true);
  draining_.clear();
  flush();
}

void node_pool::route_all(std::vector<request_ptr>& calls) {
  if (torn_down_) return;
  for (auto& r : calls) router_.route(std::move(r), false);
  flush();
}

void node_pool::tear_down() {
  std::vector<request_ptr> out;
  {
    std::lock_guard lock(mutex_);
    out.swap(incoming_);
  }
  torn_down_ = true;
  router_.stop();
  room_.stop();
  for (auto& c : room_.take_all()) out.push_back(std::move(c));
  for (auto& [name, n] : nodes_) n->stop(out);
  for (auto& r : retired_)
    if (!r.stopped) {
      r.n->stop(out);
      r.stopped = true;
    }
  dirty_.clear();
  work_.reset();
  io_.stop();
  for (auto& r : out) r->complete(errc::shutting_down, nullptr);
}

}  // namespace floodgate::redis
