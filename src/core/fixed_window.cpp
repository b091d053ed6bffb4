#include "core/fixed_window.hpp"

namespace floodgate::core {
namespace {

std::int64_t count_now(const fixed_window_state& s, std::int64_t ws) {
  return s.start == ws ? s.count : 0;
}

}  // namespace

decision decide(const fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t ws = window_start(now, p.window);
  const std::int64_t q = count_now(s, ws);
  const std::int64_t until_next = ws + p.window - now;
  if (cost > p.limit) return make_decision(false, p.limit, p.limit - q, q > 0 ? until_next : 0, -1);
  const bool allowed = cost == 0 || q + cost <= p.limit;  // a peek is never denied
  const std::int64_t q2 = q + (allowed ? cost : 0);
  return make_decision(allowed, p.limit, p.limit - q2, q2 > 0 ? until_next : 0,
                       allowed ? 0 : until_next);
}

void commit(fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t ws = window_start(now, p.window);
  s.count = count_now(s, ws) + cost;
  s.start = ws;
}

std::int64_t expiry(const fixed_window_state& s, std::int64_t now, const params& p) {
  return s.start + p.window - now;
}

}  // namespace floodgate::core
