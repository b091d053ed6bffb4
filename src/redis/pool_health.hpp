// What a client's nodes (node.hpp) report, gathered for the whole client: why they fail, in
// the server's words (backend::last_error), whether some failure will not heal by itself
// (readiness), and the counters of backend_stats: each topology's router counts what it has
// (redirections, failovers, nodes), the rest stay 0.
//
//   pool_health h;
//   h.set_problem(&n, "127.0.0.1:6379: call: NOPERM ...", true);   // io thread
//   h.last_error();                                                 // any thread
//   h.clear_problem(&n);                                            // n answered a call
//
// Each node keeps its own latest problem until it answers a call (or leaves the pool), so a
// node that answers cannot hide another one's NOPERM; last_error() is the newest of them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "floodgate/backend.hpp"

namespace floodgate::redis {

class pool_health {
 public:
  // Io thread. A lasting problem stays lasting until cleared, whatever is set after it.
  void set_problem(const void* node, std::string why, bool lasting) {
    std::lock_guard lock(mutex_);
    if (const auto it = find(node); it != problems_.end()) {
      lasting = lasting || it->lasting;
      erase(it);
    }
    problems_.push_back({node, std::move(why), lasting});
    if (lasting) lasting_.fetch_add(1, std::memory_order_relaxed);
  }
  void clear_problem(const void* node) {
    std::lock_guard lock(mutex_);
    if (const auto it = find(node); it != problems_.end()) erase(it);
  }

  // Any thread.
  std::string last_error() const {
    std::lock_guard lock(mutex_);
    return problems_.empty() ? std::string() : problems_.back().why;
  }
  bool lasting() const noexcept { return lasting_.load(std::memory_order_relaxed) > 0; }
  bool breakers_closed() const noexcept {
    return breakers_open.load(std::memory_order_relaxed) == 0;
  }
  backend_stats stats() const noexcept {
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

  std::atomic<std::uint64_t> script_reloads{0}, breaker_opens{0}, breakers_open{0};
  std::atomic<std::uint64_t> redirections{0}, failovers_seen{0}, nodes_retired{0}, nodes_known{0};

 private:
  struct problem {
    const void* node;
    std::string why;
    bool lasting;
  };

  // Guarded by mutex_.
  std::vector<problem>::iterator find(const void* node) {
    return std::find_if(problems_.begin(), problems_.end(),
                        [node](const problem& p) { return p.node == node; });
  }
  void erase(std::vector<problem>::iterator it) {
    if (it->lasting) lasting_.fetch_sub(1, std::memory_order_relaxed);
    problems_.erase(it);
  }

  mutable std::mutex mutex_;
  std::vector<problem> problems_;  // guarded by mutex_; oldest first, one per node
  std::atomic<int> lasting_{0};    // problems_ that are lasting
};

}  // namespace floodgate::redis
