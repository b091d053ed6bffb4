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
  // fixed_window, sliding_window: the window the units were recorded in, floor(now / W), and
  // the ms until it ends: a unit spent later would count in the next window, where the
  // algorithm weighs it less (sliding_window) or not at all (fixed_window).
  // token_bucket, gcra, sliding_log: window 0, and spend_within = spend_span(): the longer a
  // unit waits, the more the bucket refills behind it (their over-admission bound grows with
  // it), and sliding_log records the grant as admitted at now + spend_span.
  std::int64_t window = 0;
  std::int64_t spend_within = 0;
};

// How long a grant of token_bucket, gcra or sliding_log may be spent (docs/algorithms.md,
// "Reservations"): a tenth of a full bucket's refill time, floor(B × W / (10 × L)) — the
// bound, L × span / W units over the bucket's curve, is then at most a tenth of B — and for
// sliding_log a tenth of its window, floor(W / 10) (what a grant holds its units longer); at
// least 1. Both depend on the rate only, not on how (L, W) is reduced (params::of).
constexpr std::int64_t span_share = 10;
// fixed_window and sliding_window: a grant lives in its window and can be given back there.
constexpr bool windowed(algorithm a) {
  return a == algorithm::fixed_window || a == algorithm::sliding_window;
}
std::int64_t spend_span(algorithm a, const params& p);

// `wanted` >= 0. decision::remaining is the most any one request is admitted (the capacity
// left now), so the grant is admitted by construction.
grant reserve(any_state& s, std::int64_t now, const params& p, std::int64_t wanted);

}  // namespace floodgate::core
