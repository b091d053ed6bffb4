// reserve: takes up to `wanted` units of a key's quota at once (issue 27, "Exact quota
// reservations"): min(wanted, what is left now) — 0 is a valid grant — recorded exactly as one
// admitted request of that cost, so an instance may spend the grant without asking again and
// the state holds what those admissions would have written. Pure, like the step functions.
// lua/reserve.lua does the same in Redis, in one script call.
#pragma once

#include <cstdint>

#include "core/step.hpp"

namespace floodgate::core {

// The grant, already committed to `s`; `wanted` >= 0. decision::remaining is the most any
// one request is admitted (the capacity left now), so the grant is admitted by construction.
std::int64_t reserve(any_state& s, std::int64_t now, const params& p, std::int64_t wanted);

}  // namespace floodgate::core
