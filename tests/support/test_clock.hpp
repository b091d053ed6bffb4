// A clock tests move by hand, shared by a backend and the test (thread-safe).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "floodgate/options.hpp"

namespace floodgate::test {

class test_clock {
 public:
  // Aligned to every window the tests use (divisible by 1 h), far from the epoch.
  static constexpr std::int64_t start_ms = 1'800'000'000'000 - 1'800'000'000'000 % 3'600'000;

  test_clock() : now_(std::make_shared<std::atomic<std::int64_t>>(start_ms)) {}

  std::int64_t now() const { return now_->load(); }
  void set(std::int64_t ms) { now_->store(ms); }
  void advance(std::int64_t ms) { now_->fetch_add(ms); }
  void advance(std::chrono::milliseconds d) { advance(d.count()); }

  // The function to hand to memory_options::clock or redis_options::test_clock.
  clock_fn fn() const {
    return [n = now_] { return std::chrono::milliseconds{n->load()}; };
  }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> now_;
};

}  // namespace floodgate::test
