// give_back: returns units of a reservation (core/reserve.hpp) that its process did not spend,
// to the window the grant named, and only while that window is still the current one. What
// giving back means per algorithm:
//   fixed_window    the window's count drops by the units (at most its count): they were
//                   recorded as admissions that never happened.
//   sliding_window  the current window's count drops likewise; the last window's count, which
//                   weighs on the estimate, is not touched.
//   the others      nothing (they take no reservations: their bounds are not derived).
// A give-back naming another window returns nothing: its units were counted where they no
// longer matter (fixed_window), and returned into a new window they would be capacity the
// algorithm never had. Pure, like the step functions; lua/give_back.lua does the same.
#pragma once

#include <cstdint>

#include "core/step.hpp"

namespace floodgate::core {

// The units given back, 0..units (units >= 1).
std::int64_t give_back(any_state& s, std::int64_t now, const params& p, std::int64_t window,
                       std::int64_t units);

}  // namespace floodgate::core
