// Helpers for the cluster tests: one shared cluster per test process (tests that change the
// topology start their own), caller keys placed on chosen masters, a load loop.
#pragma once

#include <algorithm>
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
#include "pacer.hpp"
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

// Checks from several threads until stopped; counts outcomes and the slowest answer. Each
// thread checks at most `per_thread` times a second (pacer.hpp): denials remembered in this
// process and an open breaker's refusals come back in a microsecond, and spinning on them (54 M
// checks in 17 s) starved a cluster's failover of CPU on two cores. Calls that go to Redis are
// slower than that on CI's two cores, so the ceiling leaves Redis's load as it was.
class load {
 public:
  static constexpr double default_per_thread = 1000;

  load(limiter& l, std::string key, const policy& p, int threads,
       double per_thread = default_per_thread)
      : limiter_(l),
        key_(std::move(key)),
        policy_(p),
        per_thread_(per_thread),
        threads_count_(threads) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back([this] {
        pacer pace{per_thread_};
        while (!stop_.load()) {
          pace();
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
          } else {
            ++errors;
            {
              std::lock_guard lock(mutex_);
              ++error_kinds[r.error.message()];
            }
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
  // All threads together, at most.
  double per_second() const { return per_thread_ * threads_count_; }
  // A wait for `n` more checks: three times what they take at the rate the load has had so
  // far (a failover and a loaded machine slow it; counted at most at the ceiling and at least
  // at a tenth of it), plus a second.
  std::chrono::milliseconds time_for(std::int64_t n) const {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    const double rate = std::clamp(static_cast<double>(total()) / std::max(seconds, 1e-3),
                                   per_second() / 10, per_second());
    return std::chrono::milliseconds(
        1000 + static_cast<std::int64_t>(3000.0 * static_cast<double>(n) / rate));
  }

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
  double per_thread_;
  int threads_count_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<std::string, std::int64_t> error_kinds;  // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace floodgate::test
