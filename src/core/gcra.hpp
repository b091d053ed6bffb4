// gcra: the generic cell rate algorithm, a leaky bucket as a meter (docs/algorithms.md).
// The theoretical arrival time is kept exactly as whole + remainder / limit ms.
// Same three functions as fixed_window.hpp.
#pragma once

#include <cstdint>

#include "core/params.hpp"

namespace floodgate::core {

struct gcra_state {
  bool present = false;    // absent: TAT = now
  std::int64_t whole = 0;  // ms
  std::int64_t rem = 0;    // units of 1/L ms, 0 <= rem < L
};

decision decide(const gcra_state& s, std::int64_t now, const params& p, std::int64_t cost);
void commit(gcra_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t expiry(const gcra_state& s, std::int64_t now, const params& p);

}  // namespace floodgate::core
