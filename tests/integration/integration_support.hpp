// Helpers shared by the integration tests: unique key prefixes, fixed clocks, waiting for a
// backend, reading keys back from Redis.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/floodgate.hpp"
#include "redis_server.hpp"

namespace floodgate::test {

// Sanitized builds (scripts/test's ASan+UBSan lane, TSan) run several times slower: bounds on
// elapsed time stretch by this factor there, and stay as written in the normal build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int timing_factor = 4;
#else
inline constexpr int timing_factor = 1;
#endif

// A prefix no other test (or earlier run) uses.
inline std::string unique_prefix(std::string_view name) {
  static std::atomic<int> n{0};
  return "fgt:" + std::string(name) + ":" + std::to_string(::getpid()) + "." +
         std::to_string(n.fetch_add(1)) + ":";
}

// Aligned to every window the tests use, far from the epoch.
constexpr std::int64_t clock_start_ms = 1'800'000'000'000 - 1'800'000'000'000 % 3'600'000;

inline clock_fn fixed_clock(std::int64_t ms = clock_start_ms) {
  return [ms] { return std::chrono::milliseconds(ms); };
}

// A backend URL and options for the fixture, with the test's prefix and clock. The deadline
// is generous unless a test is about deadlines: on a loaded 2-core CI machine the first call,
// which waits for connect + AUTH + SCRIPT LOAD, can take longer than the 50 ms default.
inline backend_options redis_options_for(std::string prefix, clock_fn clock = {},
                                         std::chrono::milliseconds timeout = std::chrono::seconds(2)) {
  backend_options o;
  o.redis.key_prefix = std::move(prefix);
  o.redis.test_clock = std::move(clock);
  o.redis.timeout = timeout;
  return o;
}

// Waits until the backend reports healthy; false after `limit`.
inline bool wait_healthy(const backend& b,
                         std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!b.healthy()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Every key matching `pattern`, by SCAN.
inline std::vector<std::string> scan_keys(const redis_server& redis, const std::string& pattern) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    const auto r = redis.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    cursor = r.elements.at(0).str;
    for (const auto& k : r.elements.at(1).elements) keys.push_back(k.str);
  } while (cursor != "0");
  return keys;
}

// The cost a sliding_log key holds: the sum of its members' costs ('<total>:<cost>').
inline long long sliding_log_units(const redis_server& redis, const std::string& key) {
  long long sum = 0;
  for (const auto& m : redis.command({"ZRANGE", key, "0", "-1"}).elements)
    sum += std::stoll(m.str.substr(m.str.find(':') + 1));
  return sum;
}

// Counts completions and wakes a waiter when `expected` have arrived.
class completion_counter {
 public:
  explicit completion_counter(int expected) : expected_(expected) {}
  void done() {
    std::lock_guard lock(mutex_);
    ++count_;
    if (count_ >= expected_) cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return count_ >= expected_; });
  }
  int count() {
    std::lock_guard lock(mutex_);
    return count_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_ = 0;
  int expected_;
};

}  // namespace floodgate::test
