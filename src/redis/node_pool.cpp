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

node_pool::node_pool(pool_client& router, const redis_options& options, script_set scripts,
                     tls_context_result tls)
    : router_(router),
      options_(options),
      scripts_(std::move(scripts)),
      tls_(std::move(tls)),
      work_(io_.get_executor()),
      room_timer_(io_) {}

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
  for (auto& h : held_)
    if (h.call->route.target == &n) h.call->route.target = nullptr;  // routed afresh
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
  for (auto& r : requests) router_.route(std::move(r), false);
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

void node_pool::hold(request_ptr r, clock::time_point until) {
  const auto wake = std::min(until, r->deadline);
  held_.push_back({std::move(r), until});
  arm_room(wake);
}

std::vector<request_ptr> node_pool::take_held() {
  std::vector<request_ptr> out;
  out.reserve(held_.size());
  for (auto& h : held_) out.push_back(std::move(h.call));
  held_.clear();
  return out;
}

void node_pool::arm_room(clock::time_point wake) {
  if (!torn_down_) room_timer_.at_earliest(wake, [this] { wake_room(); });
}

void node_pool::wake_room() {
  const auto now = clock::now();
  std::vector<request_ptr> due, expired;
  std::vector<held_call> keep;
  auto next = clock::time_point::max();
  for (auto& h : held_) {
    if (h.call->deadline <= now) {
      expired.push_back(std::move(h.call));
    } else if (h.until <= now) {
      due.push_back(std::move(h.call));
    } else {
      next = std::min(next, std::min(h.until, h.call->deadline));
      keep.push_back(std::move(h));
    }
  }
  held_ = std::move(keep);
  if (next != clock::time_point::max()) arm_room(next);
  // Past its deadline while held: it is not sent again, so nothing follows. Routing may hold
  // calls again (a call due meets TRYAGAIN at once): after the re-arm.
  for (auto& c : expired) c->complete(errc::timeout, nullptr);
  if (!due.empty()) redispatch(std::move(due));
}

void node_pool::tear_down() {
  std::vector<request_ptr> out;
  {
    std::lock_guard lock(mutex_);
    out.swap(incoming_);
  }
  torn_down_ = true;
  router_.stop();
  room_timer_.cancel();
  for (auto& c : take_held()) out.push_back(std::move(c));
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
