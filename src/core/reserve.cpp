#include "core/reserve.hpp"

#include <algorithm>

namespace floodgate::core {

grant reserve(any_state& s, std::int64_t now, const params& p, std::int64_t wanted) {
  grant out;
  if (std::holds_alternative<fixed_window_state>(s) ||
      std::holds_alternative<sliding_window_state>(s)) {
    out.window = floor_div(now, p.window);
    out.spend_within = window_start(now, p.window) + p.window - now;
  }
  const std::int64_t units = std::min(wanted, decide(s, now, p, 0).remaining);
  if (units <= 0 || !decide(s, now, p, units).allowed) return out;
  commit(s, now, p, units);
  out.units = units;
  return out;
}

}  // namespace floodgate::core
