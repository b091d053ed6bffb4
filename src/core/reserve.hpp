// reserve: takes up to `wanted` units of a key's quota at once (issue 27, "Exact quota
// reservations"): min(wanted, what is left now) — 0 is a valid grant — recorded exactly as one
// admitted request of that cost, so an instance may spend the grant without asking again and
// the state holds what those admissions would have written. The step also says which window
// the grant was recorded in and how long it may be spent, so clients do no per-algorithm
// arithmetic. Pure, like the step functions; lua/reserve.lua does the same in Redis, in one
// script call.
#pragma once

#include <cstdint>

#include "core/step.hpp"

namespace floodgate::core {

struct grant {
  std::int64_t units = 0;  // granted, 0..wanted, already committed to the state
  // The window the units were recorded in, floor(now / W), and the ms until it ends: a unit
  // spent later would count in the next window, where the algorithm weighs it less
  // (sliding_window) or not at all (fixed_window). The other algorithms have no window to
  // count a grant in (their bounds are not derived): 0 and 0, nothing may be spent.
  std::int64_t window = 0;
  std::int64_t spend_within = 0;
};

// `wanted` >= 0. decision::remaining is the most any one request is admitted (the capacity
// left now), so the grant is admitted by construction.
grant reserve(any_state& s, std::int64_t now, const params& p, std::int64_t wanted);

}  // namespace floodgate::core
