#include "accuracy.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <span>
#include <tuple>
#include <utility>

#include "prefix_max_tree.hpp"

namespace floodgate::bench {
namespace {

// L × elapsed reaches 10^15 × run length: beyond int64 for long runs at extreme rates.
__extension__ using wide = __int128;

struct tally {
  std::int64_t over = 0;
  std::int64_t undetermined = 0;
};

// At most `limit` in any `window`-long interval: entries at t1 < t2 share one when t2 − t1 < W.
tally check_sliding(std::span<const admission> rs, std::int64_t limit, std::int64_t window) {
  tally t;
  using kept = std::pair<std::int64_t, std::int64_t>;  // (earliest, cost), earliest on top
  std::priority_queue<kept, std::vector<kept>, std::greater<>> live;
  std::int64_t live_cost = 0;
  for (const auto& r : rs) {
    // A kept entry is certainly within W of r when even its earliest instant is.
    const auto horizon = r.latest_ms - window;
    while (!live.empty() && live.top().first <= horizon) {
      live_cost -= live.top().second;
      live.pop();
    }
    if (r.earliest_ms <= horizon) {
      t.undetermined += r.cost;  // its own interval spans a window: it cannot be placed
      continue;
    }
    if (live_cost + r.cost > limit) {
      t.over += r.cost;
      continue;
    }
    live.emplace(r.earliest_ms, r.cost);
    live_cost += r.cost;
  }
  return t;
}

// At most `limit` per aligned window [kW, (k+1)W).
tally check_aligned(std::span<const admission> rs, std::int64_t limit, std::int64_t window) {
  tally t;
  std::map<std::int64_t, std::int64_t> used;  // window index → kept cost
  for (const auto& r : rs) {
    const auto first = r.earliest_ms / window, last = r.latest_ms / window;
    if (first != last) {
      t.undetermined += r.cost;  // straddles a boundary: either window could own it
      continue;
    }
    auto& u = used[first];
    if (u + r.cost > limit)
      t.over += r.cost;
    else
      u += r.cost;
  }
  return t;
}

// From a full bucket, any [a, b] admits at most B + floor(L (b − a) / W), i.e. in units of
// 1/W token: cost × W ≤ B × W + L × (b − a). With r the newest request (b = r.latest) the
// worst start a is one of the kept entries' earliest instants, found as a prefix maximum of
//   h(a) = W × (kept cost with earliest ≥ a) + L × a.
tally check_bucket(std::span<const admission> rs, std::int64_t limit, std::int64_t window,
                   std::int64_t burst) {
  tally t;
  std::vector<std::int64_t> starts;
  starts.reserve(rs.size());
  for (const auto& r : rs) starts.push_back(r.earliest_ms);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  const auto origin = starts.empty() ? 0 : starts.front();

  std::vector<wide> initial;
  initial.reserve(starts.size());
  for (auto a : starts) initial.push_back(wide{limit} * (a - origin));
  prefix_max_tree<wide> h(initial);

  for (const auto& r : rs) {
    const auto p = static_cast<std::size_t>(
        std::lower_bound(starts.begin(), starts.end(), r.earliest_ms) - starts.begin());
    const wide worst =
        h.max_up_to(p) + wide{r.cost} * window - wide{limit} * (r.latest_ms - origin);
    if (worst > wide{burst} * window) {
      t.over += r.cost;
      continue;
    }
    h.add_up_to(p, wide{r.cost} * window);
  }
  return t;
}

}  // namespace

accuracy_report check_accuracy(const policy& p, std::vector<admission> admitted) {
  std::sort(admitted.begin(), admitted.end(), [](const admission& a, const admission& b) {
    return std::tie(a.key, a.latest_ms, a.earliest_ms) <
           std::tie(b.key, b.latest_ms, b.earliest_ms);
  });
  const auto limit = p.limit();
  const auto window = p.window().count();

  accuracy_report out;
  std::int64_t aligned_over = 0;
  for (std::size_t begin = 0; begin < admitted.size();) {
    auto end = begin;
    while (end < admitted.size() && admitted[end].key == admitted[begin].key) ++end;
    const std::span<const admission> key_record(admitted.data() + begin, end - begin);
    for (const auto& r : key_record) out.admitted += r.cost;

    tally t;
    switch (p.algo()) {
      case algorithm::sliding_log:
        t = check_sliding(key_record, limit, window);
        break;
      case algorithm::sliding_window:
        t = check_sliding(key_record, limit, window);
        aligned_over += check_aligned(key_record, limit, window).over;
        break;
      case algorithm::fixed_window:
        t = check_aligned(key_record, limit, window);
        break;
      case algorithm::token_bucket:
      case algorithm::gcra:
        t = check_bucket(key_record, limit, window, p.burst());
        break;
    }
    out.over_admitted += t.over;
    out.undetermined += t.undetermined;
    begin = end;
  }

  switch (p.algo()) {
    case algorithm::sliding_log:
      out.bound = "at most limit in any window-long interval";
      break;
    case algorithm::sliding_window:
      out.bound = "at most limit in any window-long interval (the ideal it approximates)";
      out.aligned_over_admitted = aligned_over;
      break;
    case algorithm::fixed_window:
      out.bound = "at most limit per aligned window";
      break;
    case algorithm::token_bucket:
    case algorithm::gcra:
      out.bound = "at most burst + limit x elapsed / window in any interval";
      break;
  }
  return out;
}

}  // namespace floodgate::bench
