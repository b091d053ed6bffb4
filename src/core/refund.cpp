#include "core/refund.hpp"

#include <algorithm>

namespace floodgate::core {

// The newest live units go first: the refunded request is the most recent one as a rule, and
// the newest units are the ones that would hold capacity longest.
void refund(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t horizon = now - p.window;
  while (cost > 0 && !s.entries.empty() && s.entries.back().time > horizon) {
    auto& e = s.entries.back();
    const std::int64_t before =
        s.entries.size() > 1 ? s.entries[s.entries.size() - 2].total : s.base;
    const std::int64_t own = e.total - before;
    if (own > cost) {
      e.total -= cost;
      return;
    }
    cost -= own;
    s.entries.pop_back();
  }
  // Nothing live left: the empty state (what the Redis script's DEL leaves).
  if (s.entries.empty() || s.entries.back().time <= horizon) s = {};
}

// From the current window's count first, then the previous one's.
void refund(sliding_window_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t ws = window_start(now, p.window);
  if (s.start == ws) {
    const std::int64_t from_current = std::min(cost, s.current);
    s.current -= from_current;
    s.previous = std::max<std::int64_t>(0, s.previous - (cost - from_current));
  } else if (s.start == ws - p.window) {  // the stored current window is now the previous one
    s.current = std::max<std::int64_t>(0, s.current - cost);
  }
}

// Only the current window: an earlier window's admissions no longer count.
void refund(fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  if (s.start == window_start(now, p.window)) s.count = std::max<std::int64_t>(0, s.count - cost);
}

// The tokens go back, up to a full bucket.
void refund(token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  if (!s.present) return;  // a full bucket
  const std::int64_t capacity = p.burst * p.window;
  const std::int64_t elapsed = std::max<std::int64_t>(0, now - s.updated);
  const std::int64_t missing = capacity - s.level;
  // The level now (as token_bucket.cpp), then the refund, both capped at the capacity.
  const std::int64_t level =
      elapsed >= ceil_div(missing, p.limit) ? capacity : s.level + elapsed * p.limit;
  if (capacity - level <= cost * p.window) {
    s = {};  // full: the empty state (also after a backwards step: nothing is owed)
    return;
  }
  s.level = level + cost * p.window;
  s.updated = std::max(s.updated, now);
}

// The TAT moves back by cost × W / L, never before now (TAT ≤ now is the empty state).
void refund(gcra_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  if (!s.present || s.whole < now || (s.whole == now && s.rem == 0)) {
    s = {};
    return;
  }
  const std::int64_t x = s.rem - cost * p.window;  // units of 1/L ms, maybe negative
  const std::int64_t whole = s.whole + floor_div(x, p.limit);
  const std::int64_t rem = x - floor_div(x, p.limit) * p.limit;
  if (whole < now || (whole == now && rem == 0))
    s = {};
  else
    s = {true, whole, rem};
}

void refund(any_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  std::visit([&](auto& st) { refund(st, now, p, cost); }, s);
}

}  // namespace floodgate::core
