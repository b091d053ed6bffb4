#include "core/sliding_log.hpp"

#include <algorithm>

namespace floodgate::core {
namespace {

// Index of the oldest live entry: entries t <= now - window have aged out.
std::size_t first_live(const sliding_log_state& s, std::int64_t now, std::int64_t w) {
  return static_cast<std::size_t>(
      std::upper_bound(s.entries.begin(), s.entries.end(), now - w,
                       [](std::int64_t t, const sliding_log_entry& e) { return t < e.time; }) -
      s.entries.begin());
}

// The total before entry i.
std::int64_t total_before(const sliding_log_state& s, std::size_t i) {
  return i == 0 ? s.base : s.entries[i - 1].total;
}

}  // namespace

decision decide(const sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t w = p.window, l = p.limit;
  const std::size_t first = first_live(s, now, w);
  const bool any_live = first < s.entries.size();
  const std::int64_t base = total_before(s, first);
  const std::int64_t count = any_live ? s.entries.back().total - base : 0;
  const bool allowed = cost == 0 || (cost <= l && count + cost <= l);  // a peek: never denied
  const std::int64_t count2 = count + (allowed ? cost : 0);
  std::int64_t newest = any_live ? s.entries.back().time : now;
  if (allowed && cost > 0) newest = std::max(newest, now);
  const std::int64_t reset = count2 > 0 ? newest + w - now : 0;
  std::int64_t retry = 0;
  if (cost > l) {
    retry = -1;
  } else if (!allowed) {
    // The entry holding the k-th oldest live unit (k = count + cost - l >= 1) must age out.
    const std::int64_t target = base + count + cost - l;
    const auto at = std::lower_bound(
        s.entries.begin() + static_cast<std::ptrdiff_t>(first), s.entries.end(), target,
        [](const sliding_log_entry& e, std::int64_t t) { return e.total < t; });
    retry = at->time + w - now;
  }
  return make_decision(allowed, l, l - count2, reset, retry);
}

void commit(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  commit_at(s, now, p, cost, now);
}

void commit_at(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost,
               std::int64_t at) {
  const std::size_t first = first_live(s, now, p.window);
  s.base = total_before(s, first);
  s.entries.erase(s.entries.begin(), s.entries.begin() + static_cast<std::ptrdiff_t>(first));
  if (s.entries.empty()) {
    s.base = 0;
    s.entries.push_back({at, cost});
  } else if (s.entries.back().time >= at) {
    // One entry per millisecond; after a backwards clock step (or a reservation's later time),
    // the newest entry's.
    s.entries.back().total += cost;
  } else {
    s.entries.push_back({at, s.entries.back().total + cost});
  }
}

std::int64_t expiry(const sliding_log_state& s, std::int64_t now, const params& p) {
  return s.entries.empty() ? 0 : s.entries.back().time + p.window - now;
}

}  // namespace floodgate::core
