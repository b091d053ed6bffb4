// Holds a loop that issues checks or requests to a rate. A check answered in the process (a
// remembered denial, a reserved unit, local mode, a breaker that is open) takes about a
// microsecond: a loop of them spins at millions a second and, on CI's two cores, starves the
// redis-servers the test is waiting on (a cluster failover did not complete in 15 s while a
// load loop made 54 M checks). Every loop that checks until a time passes or a condition holds
// calls a pacer once per iteration.
//
//   pacer pace{1000};                     // at most 1,000 iterations a second (this thread's)
//   while (!done) { pace(); l.check(...); }
//   wait_for(..., pace.time_for(remaining) * 3);   // a wait derived from the rate
//
// A loop slower than the rate (calls that wait on Redis) never sleeps: the pacer is a ceiling,
// so a test still puts as much load on Redis as it did, only not the in-process spin. A loop
// that fell behind (a slow call) does not burst to catch up.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace floodgate::test {

class pacer {
 public:
  using clock = std::chrono::steady_clock;

  explicit pacer(double per_second)
      : per_second_(per_second),
        interval_(std::chrono::duration_cast<clock::duration>(
            std::chrono::duration<double>(1.0 / per_second))) {}

  // Once per iteration: returns when the iteration's turn has come.
  void operator()() {
    const auto now = clock::now();
    if (next_ > now) {
      std::this_thread::sleep_until(next_);
      next_ += interval_;
    } else {
      next_ = now + interval_;
    }
  }

  double per_second() const { return per_second_; }
  clock::duration interval() const { return interval_; }
  // The least time `n` iterations take at this rate: what a wait for them derives from.
  std::chrono::milliseconds time_for(std::int64_t n) const {
    return std::chrono::ceil<std::chrono::milliseconds>(interval_ * n);
  }

 private:
  double per_second_;
  clock::duration interval_;
  clock::time_point next_{};
};

}  // namespace floodgate::test
