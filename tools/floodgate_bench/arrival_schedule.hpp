// When an open-loop worker means to send each request: evenly spaced, or with the exponential
// gaps of a Poisson process (many independent users). Pure: the caller owns the clock.
//
//   arrival_schedule s(start_us, 250.0, arrivals::poisson, 0.5, seed);  // 250/s, half a gap in
//   auto t = s.next();   // intended send time, µs; strictly the order requests go out
#pragma once

#include <cstdint>
#include <random>

#include "options.hpp"

namespace floodgate::bench {

class arrival_schedule {
 public:
  // `rate` per second (> 0); the first arrival is `phase` (0..1) of a mean gap after `start_us`,
  // so the threads of a run, given phases i / n, interleave instead of sending together.
  arrival_schedule(std::int64_t start_us, double rate, arrivals kind, double phase,
                   std::uint64_t seed);

  std::int64_t next();

 private:
  double start_us_;
  double gap_us_;  // mean gap
  arrivals kind_;
  double phase_us_;
  double offset_us_;  // since start, of the next arrival (double: no drift over long runs)
  std::uint64_t index_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace floodgate::bench
