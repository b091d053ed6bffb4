#include "core/refund.hpp"

#include <algorithm>

namespace floodgate::core {

// The newest live units go first: the refunded request is the most recent one as a rule, and
// the newest units are the ones that would hold capacity longest.
std::int64_t refund(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t horizon = now - p.window;
  std::int64_t left = cost;
  while (left > 0 && !s.entries.empty() && s.entries.back().time > horizon) {
    auto& e = s.entries.back();
    const std::int64_t before =
        s.entries.size() > 1 ? s.entries[s.entries.size() - 2].total : s.base;
    const std::int64_t own = e.total - before;
    if (own > left) {
      e.total -= left;
      return cost;
    }
    left -= own;
    s.entries.pop_back();
  }
  // Nothing live left: the empty state (what the Redis script's DEL leaves).
  if (s.entries.empty() || s.entries.back().time <= horizon) s = {};
  return cost - left;
}

// From the current window's count first, then the previous one's.
std::int64_t refund(sliding_window_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t ws = window_start(now, p.window);
  if (s.start == ws) {
    const std::int64_t from_current = std::min(cost, s.current);
    const std::int64_t from_previous = std::min(cost - from_current, s.previous);
    s.current -= from_current;
    s.previous -= from_previous;
    return from_current + from_previous;
  }
  if (s.start == ws - p.window) {  // the stored current window is now the previous one
    const std::int64_t given = std::min(cost, s.current);
    s.current -= given;
    return given;
  }
  return 0;
}

// Only the current window: an earlier window's admissions no longer count.
std::int64_t refund(fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  if (s.start != window_start(now, p.window)) return 0;
  const std::int64_t given = std::min(cost, s.count);
  s.count -= given;
  return given;
}

// The tokens go back, up to a full bucket.
std::int64_t refund(token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  if (!s.present) return 0;  // a full bucket
  const std::int64_t capacity = p.burst * p.window;
  const std::int64_t elapsed = std::max<std::int64_t>(0, now - s.updated);
  const std::int64_t missing = capacity - s.level;
  // The level now (as token_bucket.cpp), then the refund, both capped at the capacity.
  const std::int64_t level =
      elapsed >= ceil_div(missing, p.limit) ? capacity : s.level + elapsed * p.limit;
  if (capacity - level <= cost * p.window) {
    s = {};  // full: the empty state (also after a backwards step: nothing is owed)
    return ceil_div(std::max<std::int64_t>(0, capacity - level), p.window);
  }
  s.level = level + cost * p.window;
  s.updated = std::max(s.updated, now);
  return cost;
}

// The TAT moves back by cost × W / L, never before now (TAT ≤ now is the empty state).
std::int64_t refund(gcra_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  if (!s.present || s.whole < now || (s.whole == now && s.rem == 0)) {
    s = {};
    return 0;
  }
  // What the TAT holds beyond now, in units of 1/L ms (a unit of cost is W of them).
  const std::int64_t owed = (s.whole - now) * p.limit + s.rem;
  if (owed <= cost * p.window) {
    s = {};
    return ceil_div(owed, p.window);
  }
  const std::int64_t x = s.rem - cost * p.window;  // units of 1/L ms, negative here
  s.whole += floor_div(x, p.limit);
  s.rem = x - floor_div(x, p.limit) * p.limit;
  return cost;
}

std::int64_t refund(any_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  return std::visit([&](auto& st) { return refund(st, now, p, cost); }, s);
}

}  // namespace floodgate::core
