#include "core/reserve.hpp"

#include <algorithm>

namespace floodgate::core {

std::int64_t spend_span(algorithm a, const params& p) {
  const std::int64_t span = a == algorithm::sliding_log
                                ? p.window / span_share
                                : p.burst * p.window / (span_share * p.limit);
  return std::max<std::int64_t>(1, span);
}

grant reserve(any_state& s, std::int64_t now, const params& p, std::int64_t wanted) {
  grant out;
  if (std::holds_alternative<fixed_window_state>(s) ||
      std::holds_alternative<sliding_window_state>(s)) {
    out.window = floor_div(now, p.window);
    out.spend_within = window_start(now, p.window) + p.window - now;
  } else {
    out.spend_within =
        spend_span(std::holds_alternative<sliding_log_state>(s) ? algorithm::sliding_log
                                                                : algorithm::token_bucket,
                   p);
  }
  const std::int64_t units = std::min(wanted, decide(s, now, p, 0).remaining);
  if (units <= 0 || !decide(s, now, p, units).allowed) return out;
  if (auto* log = std::get_if<sliding_log_state>(&s)) {
    // Counted from now until the last instant a unit may be spent, plus W: wherever in that
    // span a unit is spent, its W ms lie inside what the log holds it for (exact).
    commit_at(*log, now, p, units, now + out.spend_within);
  } else {
    commit(s, now, p, units);
  }
  out.units = units;
  return out;
}

}  // namespace floodgate::core
