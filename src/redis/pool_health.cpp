#include "redis/pool_health.hpp"

#include <algorithm>

namespace floodgate::redis {

void pool_health::set_problem(const void* node, std::string why, bool lasting) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(problems_.begin(), problems_.end(),
                               [node](const problem& p) { return p.node == node; });
  if (it != problems_.end()) {
    lasting = lasting || it->lasting;
    if (it->lasting) lasting_.fetch_sub(1, std::memory_order_relaxed);
    problems_.erase(it);
  }
  problems_.push_back({node, std::move(why), lasting});
  if (lasting) lasting_.fetch_add(1, std::memory_order_relaxed);
}

void pool_health::clear_problem(const void* node) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(problems_.begin(), problems_.end(),
                               [node](const problem& p) { return p.node == node; });
  if (it == problems_.end()) return;
  if (it->lasting) lasting_.fetch_sub(1, std::memory_order_relaxed);
  problems_.erase(it);
}

std::string pool_health::last_error() const {
  std::lock_guard lock(mutex_);
  return problems_.empty() ? std::string() : problems_.back().why;
}

backend_stats pool_health::stats() const noexcept {
  backend_stats s;
  s.script_reloads = script_reloads.load(std::memory_order_relaxed);
  s.breaker_opens = breaker_opens.load(std::memory_order_relaxed);
  s.breakers_open = breakers_open.load(std::memory_order_relaxed);
  s.redirections = redirections.load(std::memory_order_relaxed);
  s.failovers_seen = failovers_seen.load(std::memory_order_relaxed);
  s.nodes_retired = nodes_retired.load(std::memory_order_relaxed);
  s.nodes_known = nodes_known.load(std::memory_order_relaxed);
  return s;
}

}  // namespace floodgate::redis
