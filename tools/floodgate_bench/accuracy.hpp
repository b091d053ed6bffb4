// Over-admission: the admitted cost that the algorithm's definition (docs/algorithms.md)
// would have refused, computed from the admitted requests' own record, not from what the
// limiter answered.
//
// The deciding clock read "now" at some instant inside each request's [earliest, latest]
// interval. The check counts only definite violations: a set of admitted requests that break
// the definition wherever in their intervals the true instants lie. So a reported excess is
// certain; requests whose interval is too wide to place are left out (and counted as
// `undetermined`). Replay is greedy in order of `latest`: a request that would complete a
// definite violation with the ones kept so far is counted and not kept, as an exact limiter
// would have refused it.
//
// Bounds checked, per key:
//   sliding_log, sliding_window: at most L in any interval of W ms (for sliding_window this is
//     the ideal it approximates, so the count is its error; `aligned_over_admitted` checks its
//     hard bound, at most L per aligned window);
//   fixed_window (and --naive): at most L per aligned window [kW, (k+1)W);
//   token_bucket, gcra: at most B + floor(L × (b − a) / W) in any [a, b] (from a full bucket).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "admission.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::bench {

struct accuracy_report {
  std::int64_t admitted = 0;       // admitted cost in the record
  std::int64_t over_admitted = 0;  // admitted cost the definition refuses
  std::int64_t undetermined = 0;   // admitted cost whose interval could not be placed
  std::optional<std::int64_t> aligned_over_admitted;  // sliding_window only
  std::string bound;                                  // the bound checked, in words
};

accuracy_report check_accuracy(const policy& p, std::vector<admission> admitted);

}  // namespace floodgate::bench
