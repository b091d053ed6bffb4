#include "traffic_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace floodgate::bench {
namespace {

// Loads are sums of rounded weights: 48 may come out as 48.000000001. Within this relative
// margin a load counts as the integer it rounds to (at the limit, not over it).
constexpr double slack = 1e-9;

}  // namespace

std::vector<double> per_key_load(const key_distribution& d, double rate, std::int64_t cost,
                                 std::chrono::milliseconds window) {
  std::vector<double> load(d.keys());
  const double per_window = rate * static_cast<double>(cost) *
                            static_cast<double>(window.count()) / 1000.0;
  for (std::size_t k = 0; k < load.size(); ++k) load[k] = d.weight(k) * per_window;
  return load;
}

traffic_shape shape_of(const std::vector<double>& load, const key_distribution& d,
                       std::int64_t limit) {
  traffic_shape s;
  const auto l = static_cast<double>(limit);
  for (std::size_t k = 0; k < load.size(); ++k) {
    if (load[k] > l * (1 + slack)) {
      s.over_limit_share += d.weight(k);
      ++s.keys_over;
    } else if (load[k] >= l / 2 * (1 - slack)) {
      s.near_limit_share += d.weight(k);
    }
  }
  return s;
}

std::int64_t limit_for_over_limit_share(const std::vector<double>& load, const key_distribution& d,
                                        double share, std::int64_t min_limit) {
  // Loads fall with k, so "keys 0..m-1 over" is a prefix; its share is the top-m weight.
  std::size_t best_m = 0;
  double top = 0, best_gap = share;
  for (std::size_t m = 1; m <= load.size(); ++m) {
    top += d.weight(m - 1);
    if (std::abs(top - share) < best_gap) {
      best_gap = std::abs(top - share);
      best_m = m;
    }
    if (top > share) break;  // further prefixes only move away
  }
  // Key best_m at or under the limit (ceil of its load); none left means every key is over.
  const double under = best_m < load.size() ? load[best_m] : 0.0;
  const double limit = std::ceil(under * (1 - slack));
  const double cap = static_cast<double>(std::numeric_limits<std::int64_t>::max() / 4);
  return std::max(min_limit, static_cast<std::int64_t>(std::min(limit, cap)));
}

}  // namespace floodgate::bench
