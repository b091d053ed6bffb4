#include "core/sliding_window.hpp"

namespace floodgate::core {
namespace {

struct counts {
  std::int64_t ws, p, q;
};

counts counts_now(const sliding_window_state& s, std::int64_t now, std::int64_t w) {
  const std::int64_t ws = window_start(now, w);
  if (s.start == ws) return {ws, s.previous, s.current};
  if (s.start == ws - w) return {ws, s.current, 0};
  return {ws, 0, 0};
}

}  // namespace

decision decide(const sliding_window_state& s, std::int64_t now, const params& p,
                std::int64_t cost) {
  const std::int64_t w = p.window, l = p.limit;
  const auto [ws, prev, cur] = counts_now(s, now, w);
  const std::int64_t e = now - ws;
  const std::int64_t used = cur + ceil_div(prev * (w - e), w);
  const bool allowed = cost == 0 || (cost <= l && used + cost <= l);  // a peek: never denied
  const std::int64_t cur2 = cur + (allowed ? cost : 0);
  const std::int64_t reset = cur2 > 0 ? ws + 2 * w - now : (prev > 0 ? ws + w - now : 0);
  std::int64_t retry = 0;
  if (cost > l) {
    retry = -1;
  } else if (!allowed) {
    const std::int64_t a = l - cur - cost;
    retry = a >= 0 ? ws + w - floor_div(a * w, prev) - now
                   : ws + 2 * w - floor_div((l - cost) * w, cur) - now;
  }
  return make_decision(allowed, l, l - used - (allowed ? cost : 0), reset, retry);
}

void commit(sliding_window_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const auto [ws, prev, cur] = counts_now(s, now, p.window);
  s = {ws, prev, cur + cost};
}

std::int64_t expiry(const sliding_window_state& s, std::int64_t now, const params& p) {
  return s.start + 2 * p.window - now;
}

}  // namespace floodgate::core
