#include "local_mode.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <random>

#include "floodgate/errors.hpp"
#include "memory/memory_backend.hpp"

namespace floodgate::detail {

namespace {

// A heartbeat a second; an instance missing three is no longer counted.
constexpr auto heartbeat_interval = std::chrono::seconds(1);
constexpr auto heartbeat_ttl = std::chrono::milliseconds(3000);
// Scaled policies remembered, at most (a service has a few rules; a library caller could make
// policies without end).
constexpr std::size_t max_scaled = 4096;

std::string make_instance_id() {
  std::random_device random;
  char id[48];
  std::snprintf(id, sizeof id, "%08x%08x-%d", random(), random(), static_cast<int>(::getpid()));
  return id;
}

// What a local-mode check that can never pass at this N answers.
decision refused(const policy& p, const policy* scaled) {
  decision d;
  d.allowed = false;
  d.limit = scaled ? scaled->capacity() : 0;
  d.remaining = 0;
  d.reset_after = p.window();
  d.retry_after = p.window();
  return d;
}

}  // namespace

local_mode::local_mode(std::shared_ptr<backend> b, const limiter_options& options)
    : backend_(std::move(b)),
      options_(options),
      instance_id_(make_instance_id()) {
  if (options_.instances > 0) instances_.store(options_.instances);
}

local_mode::~local_mode() {
  {
    std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::int64_t local_mode::now_ms() const {
  // Real time even under a test clock: a frozen clock would make an outage last forever.
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

local_mode::route local_mode::route_now() {
  if (!heartbeats_on_.load(std::memory_order_relaxed)) start_heartbeats();
  if (!outage_.load(std::memory_order_acquire)) return route::backend;
  if (now_ms() < outage_until_.load(std::memory_order_relaxed)) return route::local;
  bool expected = false;
  return probe_in_flight_.compare_exchange_strong(expected, true) ? route::probe : route::local;
}

void local_mode::answered(route r) {
  // Only the probe's answer ends an outage: a call sent before the outage began may answer
  // late, which says nothing about the backend now.
  if (r != route::probe) return;
  outage_.store(false, std::memory_order_release);
  probe_in_flight_.store(false);
  // The local state stays: what was admitted locally still counts until its window ends, so
  // another outage in that window does not hand the local share out again (its keys expire
  // like any memory backend's).
}

void local_mode::not_asked(route r) {
  if (r == route::probe) probe_in_flight_.store(false);
}

void local_mode::failed(route r, std::error_code why) {
  if (why.category() == error_category()) last_failure_.store(why.value());
  outage_until_.store(now_ms() + options_.local_mode_probe_interval.count());
  outage_.store(true, std::memory_order_release);
  if (r == route::probe) probe_in_flight_.store(false);
}

const policy* local_mode::scaled(const policy& p, std::int64_t n) {
  const std::int64_t limit = p.limit() / n;
  const std::int64_t burst = p.burst() / n;
  if (limit < 1 || burst < 1) return nullptr;
  std::string name = p.name();
  name += '\0';
  name += to_string(p.algo());
  for (auto v : {p.limit(), static_cast<std::int64_t>(p.window().count()), p.burst(), n,
                 static_cast<std::int64_t>(p.block_for().count())}) {
    name += '\0';
    name += std::to_string(v);
  }
  auto& slot = scaled_[name];
  if (!slot) {
    if (scaled_.size() > max_scaled) {
      scaled_.clear();
      return scaled(p, n);
    }
    slot = std::make_unique<policy>(
        policy(p.name(), p.algo(), limit, p.window(),
               takes_burst(p.algo()) ? std::optional<std::int64_t>(burst) : std::nullopt,
               failure_mode::closed, local_denials::off)
            .with_block_for(p.block_for()));
  }
  return slot.get();
}

backend_reply local_mode::decide(std::span<const check_item> items) {
  decisions_.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t n = std::max<std::int64_t>(1, instances_.load(std::memory_order_relaxed));
  std::lock_guard lock(mutex_);
  std::vector<check_item> local_items;
  local_items.reserve(items.size());
  bool possible = true;
  for (const auto& item : items) {
    const policy* s = scaled(*item.policy, n);
    if (s == nullptr || item.cost > s->capacity()) possible = false;
    local_items.push_back({item.key, s, item.cost});
  }
  if (!possible) {
    // Some item can never pass at this N: all-or-nothing refuses them all.
    backend_reply r;
    for (std::size_t i = 0; i < items.size(); ++i)
      r.decisions.push_back(refused(*items[i].policy, local_items[i].policy));
    return r;
  }
  // Built at the first outage and kept: most limiters never need it.
  if (!local_) local_ = std::make_shared<memory::memory_backend>();
  return local_->check(local_items);
}

std::error_code local_mode::last_failure() const noexcept {
  const int code = last_failure_.load();
  return code ? make_error_code(static_cast<errc>(code)) : make_error_code(errc::not_connected);
}

void local_mode::start_heartbeats() {
  heartbeats_on_.store(true, std::memory_order_relaxed);
  if (options_.instances > 0) return;
  std::call_once(heartbeat_started_,
                 [this] { heartbeat_ = std::thread([this] { heartbeat_loop(); }); });
}

void local_mode::heartbeat_loop() {
  std::unique_lock lock(stop_mutex_);
  while (!stopping_) {
    lock.unlock();
    // Synchronous: the backend answers every call by its deadline.
    std::promise<std::pair<std::error_code, std::int64_t>> answer;
    backend_->async_heartbeat(instance_id_, heartbeat_ttl, [&](std::error_code ec, std::int64_t n) {
      answer.set_value({ec, n});
    });
    const auto [ec, n] = answer.get_future().get();
    if (!ec && n >= 1) instances_.store(n, std::memory_order_relaxed);
    lock.lock();
    stop_.wait_for(lock, heartbeat_interval, [this] { return stopping_; });
  }
}

}  // namespace floodgate::detail
