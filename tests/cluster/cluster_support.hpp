// Helpers for the cluster tests: one shared cluster per test process (tests that change the
// topology start their own), caller keys placed on chosen masters, a load loop.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/floodgate.hpp"
#include "redis/cluster_protocol.hpp"
#include "redis_cluster.hpp"
#include "wait_for.hpp"

namespace floodgate::test {

using namespace std::chrono_literals;

// Shared by the tests of one process that leave the topology as they found it.
inline redis_cluster& shared_cluster() {
  static redis_cluster cluster;
  return cluster;
}

inline std::string unique_prefix(std::string_view name) {
  static std::atomic<int> n{0};
  return "fgc:" + std::string(name) + ":" + std::to_string(::getpid()) + "." +
         std::to_string(n.fetch_add(1)) + ":";
}

// A caller key (stored plain, so its slot is the key's own) served by master `m`.
inline std::string key_on(const redis_cluster& c, int m, const std::string& stem) {
  for (int i = 0;; ++i) {
    const auto key = stem + std::to_string(i);
    if (c.master_of(redis::key_slot(key)) == m) return key;
  }
}

inline bool wait_healthy(const backend& b, std::chrono::milliseconds limit = 10s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!b.healthy()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Checks from several threads until stopped; counts outcomes and the slowest answer.
class load {
 public:
  load(limiter& l, std::string key, const policy& p, int threads)
      : limiter_(l), key_(std::move(key)), policy_(p) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back([this] {
        while (!stop_.load()) {
          const auto start = std::chrono::steady_clock::now();
          const auto r = limiter_.check(key_, policy_);
          const auto took = std::chrono::steady_clock::now() - start;
          auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
          for (auto m = max_us.load(); us > m && !max_us.compare_exchange_weak(m, us);) {
          }
          if (r.outcome == outcome::allowed) {
            ++admitted;
          } else if (r.outcome == outcome::over_limit) {
            ++denied;
            // A denial remembered in this process comes back in a microsecond: spinning on it
            // (tens of millions of checks) starved the cluster's failover of CPU on two cores.
            if (r.local) std::this_thread::sleep_for(1ms);
          } else {
            ++errors;
            {
              std::lock_guard lock(mutex_);
              ++error_kinds[r.error.message()];
            }
            // A client that met an error does not spin on it (nor starve the cluster's failover
            // of CPU on two cores).
            std::this_thread::sleep_for(1ms);
            auto e = error_us.load();
            while (us > e && !error_us.compare_exchange_weak(e, us)) {
            }
          }
        }
      });
  }
  ~load() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  std::int64_t total() const { return admitted + denied + errors; }

  std::atomic<std::int64_t> admitted{0}, denied{0}, errors{0};
  std::atomic<std::int64_t> max_us{0}, error_us{0};  // slowest answer; slowest error

  // "message: count, ..." of the errors seen.
  std::string error_summary() {
    std::lock_guard lock(mutex_);
    std::string out;
    for (const auto& [what, n] : error_kinds) out += what + ": " + std::to_string(n) + "; ";
    return out;
  }

 private:
  limiter& limiter_;
  std::string key_;
  const policy& policy_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<std::string, std::int64_t> error_kinds;  // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace floodgate::test
