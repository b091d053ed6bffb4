// The wait before trying a lost connection again: from `min`, doubling after each failure up
// to `max`, each wait spread ±50% at random so that clients which lost a server together do
// not all come back at the same moment. A success starts again from `min`.
//
//   backoff b{options.reconnect_backoff_min, options.reconnect_backoff_max};
//   timer.expires_after(b.next());      // after a failed attempt
//   b.reset();                          // once connected
//
// Not thread-safe: one per retrying thing (a connection, a subscription).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace floodgate::redis {

class backoff {
 public:
  backoff(std::chrono::milliseconds min, std::chrono::milliseconds max)
      : min_(min), max_(std::max(min, max)), base_(min), jitter_(std::random_device{}()) {}

  // The wait before the next attempt: within [base/2, base*3/2] of a base that doubles from
  // min to max with each call, and at least 1 ms.
  std::chrono::milliseconds next() {
    const auto base = base_;
    base_ = std::min(base_ * 2, max_);
    std::uniform_int_distribution<std::int64_t> spread(base.count() / 2,
                                                       base.count() + base.count() / 2);
    return std::chrono::milliseconds(std::max<std::int64_t>(1, spread(jitter_)));
  }
  // After a success: the next wait is about `min` again.
  void reset() noexcept { base_ = min_; }

 private:
  std::chrono::milliseconds min_, max_, base_;
  std::minstd_rand jitter_;
};

}  // namespace floodgate::redis
