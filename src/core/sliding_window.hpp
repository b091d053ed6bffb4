// sliding_window: the current fixed window plus the previous one weighted by its overlap
// (docs/algorithms.md). O(1) state; approximate. Same three functions as fixed_window.hpp.
#pragma once

#include <cstdint>
#include <limits>

#include "core/params.hpp"

namespace floodgate::core {

struct sliding_window_state {
  std::int64_t start = std::numeric_limits<std::int64_t>::min();  // of the current window
  std::int64_t previous = 0;
  std::int64_t current = 0;
};

decision decide(const sliding_window_state& s, std::int64_t now, const params& p,
                std::int64_t cost);
void commit(sliding_window_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t expiry(const sliding_window_state& s, std::int64_t now, const params& p);

}  // namespace floodgate::core
