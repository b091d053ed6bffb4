// The per-key load of an open-loop run (--rate over --keys, uniform or Zipf), in the policy's
// units: key k's share of the rate times the cost, per window. With Zipf-skewed keys it is
// heavy-tailed: a few hot keys far over their limit, some near it, most well under. From it,
// the share of traffic that comes from keys over their limit, or the limit that makes that
// share a given one (--over-limit-share).
//
//   auto load = per_key_load(dist, 5000.0, 1, 1000ms);    // cost per window, per key
//   auto l = limit_for_over_limit_share(load, dist, 0.10); // 10 % of requests from keys over
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "key_distribution.hpp"

namespace floodgate::bench {

// Offered cost per window for each key (key 0 the heaviest).
std::vector<double> per_key_load(const key_distribution& d, double rate, std::int64_t cost,
                                 std::chrono::milliseconds window);

// Share of requests from keys whose offered load exceeds `limit`, and from keys within
// [limit / 2, limit] (near it).
struct traffic_shape {
  double over_limit_share = 0;
  double near_limit_share = 0;
  std::size_t keys_over = 0;
};
traffic_shape shape_of(const std::vector<double>& load, const key_distribution& d,
                       std::int64_t limit);

// The limit (>= min_limit) that puts the over-limit share closest to `share`: keys 0..m-1
// over it and key m at or under it, for the m whose top-m share is nearest. A distribution
// with few steps (uniform keys, a very hot first key) may not come near: the caller reports
// the share it got.
std::int64_t limit_for_over_limit_share(const std::vector<double>& load, const key_distribution& d,
                                        double share, std::int64_t min_limit);

}  // namespace floodgate::bench
