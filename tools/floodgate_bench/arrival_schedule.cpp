#include "arrival_schedule.hpp"

#include <cmath>

namespace floodgate::bench {

arrival_schedule::arrival_schedule(std::int64_t start_us, double rate, arrivals kind,
                                   double phase, std::uint64_t seed)
    : start_us_(static_cast<double>(start_us)),
      gap_us_(1e6 / rate),
      kind_(kind),
      phase_us_(phase * gap_us_),
      offset_us_(phase_us_),
      rng_(seed) {}

std::int64_t arrival_schedule::next() {
  const auto t = static_cast<std::int64_t>(std::llround(start_us_ + offset_us_));
  ++index_;
  if (kind_ == arrivals::constant) {
    // From the index, not by adding gaps: the k-th arrival is exactly where it should be.
    offset_us_ = phase_us_ + static_cast<double>(index_) * gap_us_;
  } else {
    offset_us_ += std::exponential_distribution<double>(1.0 / gap_us_)(rng_);
  }
  return t;
}

}  // namespace floodgate::bench
