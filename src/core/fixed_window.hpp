// fixed_window: one counter per epoch-aligned window (docs/algorithms.md).
//
// Every algorithm in src/core has the same three pure functions, no I/O, time passed in:
//   decide(state, now, params, cost) -> decision       what the request gets
//   commit(state, now, params, cost)                    applies an allowed request (cost > 0)
//   expiry(state, now, params) -> ms                    how long the committed state matters
#pragma once

#include <cstdint>
#include <limits>

#include "core/params.hpp"

namespace floodgate::core {

struct fixed_window_state {
  std::int64_t start = std::numeric_limits<std::int64_t>::min();  // absent: matches no window
  std::int64_t count = 0;
};

decision decide(const fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost);
void commit(fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t expiry(const fixed_window_state& s, std::int64_t now, const params& p);

}  // namespace floodgate::core
