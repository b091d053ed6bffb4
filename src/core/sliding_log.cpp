#include "core/sliding_log.hpp"

#include <algorithm>

namespace floodgate::core {
namespace {

// Index of the oldest live entry: entries t <= now - window have aged out.
std::size_t first_live(const sliding_log_state& s, std::int64_t now, std::int64_t w) {
  return static_cast<std::size_t>(
      std::upper_bound(s.entries.begin(), s.entries.end(), now - w) - s.entries.begin());
}

}  // namespace

decision decide(const sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t w = p.window, l = p.limit;
  const std::size_t first = first_live(s, now, w);
  const auto count = static_cast<std::int64_t>(s.entries.size() - first);
  const bool allowed = cost <= l && count + cost <= l;
  const std::int64_t count2 = count + (allowed ? cost : 0);
  std::int64_t newest = count > 0 ? s.entries.back() : now;
  if (allowed && cost > 0) newest = std::max(newest, now);
  const std::int64_t reset = count2 > 0 ? newest + w - now : 0;
  std::int64_t retry = 0;
  if (cost > l) {
    retry = -1;
  } else if (!allowed) {
    const std::int64_t k = count + cost - l;  // entries that must age out first, k >= 1
    retry = s.entries[first + static_cast<std::size_t>(k - 1)] + w - now;
  }
  return make_decision(allowed, l, l - count2, reset, retry);
}

void commit(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  s.entries.erase(s.entries.begin(),
                  s.entries.begin() + static_cast<std::ptrdiff_t>(first_live(s, now, p.window)));
  // A clock that stepped back puts `now` before newer entries: keep the log sorted.
  auto at = std::upper_bound(s.entries.begin(), s.entries.end(), now);
  s.entries.insert(at, static_cast<std::size_t>(cost), now);
}

std::int64_t expiry(const sliding_log_state& s, std::int64_t now, const params& p) {
  return s.entries.empty() ? 0 : s.entries.back() + p.window - now;
}

}  // namespace floodgate::core
