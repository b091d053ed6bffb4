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

// How far `t` is ahead of now, in units of 1/L ms.
std::int64_t ahead(tat t, std::int64_t now, const params& p) {
  return (t.whole - now) * p.limit + t.rem;
}

}  // namespace

decision decide(const gcra_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t bw = p.burst * p.window;
  const tat base = base_of(s, now);
  const std::int64_t d0 = ahead(base, now, p);
  if (cost > p.burst)
    return make_decision(false, p.burst, (bw - d0) / p.window, ceil_div(d0, p.limit), -1);
  const std::int64_t d = ahead(advance(base, cost, p), now, p);
  const bool allowed = d <= bw;
  const std::int64_t level = allowed ? d : d0;
  return make_decision(allowed, p.burst, floor_div(bw - level, p.window),
                       ceil_div(level, p.limit), allowed ? 0 : ceil_div(d - bw, p.limit));
}

void commit(gcra_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const tat next = advance(base_of(s, now), cost, p);
  s = {true, next.whole, next.rem};
}

std::int64_t expiry(const gcra_state& s, std::int64_t now, const params& p) {
  return ceil_div(ahead(base_of(s, now), now, p), p.limit);
}

}  // namespace floodgate::core
