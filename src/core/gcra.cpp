#include "core/gcra.hpp"

namespace floodgate::core {
namespace {

struct tat {
  std::int64_t whole, rem;
};

// max(TAT, now)
tat base_of(const gcra_state& s, std::int64_t now) {
  if (!s.present || s.whole < now) return {now, 0};
  return {s.whole, s.rem};
}

tat advance(tat t, std::int64_t cost, const params& p) {
  const std::int64_t r = t.rem + cost * p.window;
  return {t.whole + r / p.limit, r % p.limit};
}

// `t` is d = (t.whole - now) * L + t.rem units of 1/L ms ahead of now. After a backwards clock
// step that product can leave the exact range (int64_t here, 2^53 in Lua), so these compute
// the doc's values from t.whole - now and t.rem without forming it.
bool fits(tat t, std::int64_t now, const params& p) {  // d <= B * W
  return t.whole - now <= floor_div(p.burst * p.window - t.rem, p.limit);
}
std::int64_t room(tat t, std::int64_t now, const params& p) {  // floor((B*W - d) / W), or 0
  if (!fits(t, now, p)) return 0;
  return floor_div(p.burst * p.window - ((t.whole - now) * p.limit + t.rem), p.window);
}
std::int64_t ceil_ahead(tat t, std::int64_t now, const params& p) {  // ceil(d / L)
  return t.whole - now + ceil_div(t.rem, p.limit);
}

}  // namespace

decision decide(const gcra_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const tat base = base_of(s, now);
  if (cost > p.burst)
    return make_decision(false, p.burst, room(base, now, p), ceil_ahead(base, now, p), -1);
  const tat next = advance(base, cost, p);
  if (cost > 0 && !fits(next, now, p)) {  // a peek is always allowed, even far behind
    // ceil((d - B*W) / L), split like ceil_ahead
    const std::int64_t retry = next.whole - now + ceil_div(next.rem - p.burst * p.window, p.limit);
    return make_decision(false, p.burst, room(base, now, p), ceil_ahead(base, now, p), retry);
  }
  return make_decision(true, p.burst, room(next, now, p), ceil_ahead(next, now, p), 0);
}

void commit(gcra_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const tat next = advance(base_of(s, now), cost, p);
  s = {true, next.whole, next.rem};
}

std::int64_t expiry(const gcra_state& s, std::int64_t now, const params& p) {
  return ceil_ahead(base_of(s, now), now, p);
}

}  // namespace floodgate::core
