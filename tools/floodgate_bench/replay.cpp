#include "replay.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <tuple>
#include <utility>

#include "floodgate/reference.hpp"

namespace floodgate::bench {
namespace {

// floor(a / b), b > 0 (times are positive in practice; tests may use small ones).
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b != 0 && a < 0);
}

// The counts every replay of these records starts from.
replay_report report_of(const judging_order& records) {
  replay_report out;
  out.recorded = records.recorded;
  out.unjudged = records.unjudged;
  return out;
}

}  // namespace

judging_order in_judging_order(std::vector<decision_record> records, std::int64_t cutoff_ms) {
  judging_order out;
  out.recorded = records.size();
  out.unjudged =
      std::erase_if(records, [&](const decision_record& r) { return r.time_ms >= cutoff_ms; });
  std::sort(records.begin(), records.end(), [](const decision_record& a, const decision_record& b) {
    return std::tuple(a.key, a.time_ms, b.allowed) < std::tuple(b.key, b.time_ms, a.allowed);
  });
  out.records = std::move(records);
  return out;
}

replay_report replay_own_definition(const policy& p, const judging_order& in_order) {
  replay_report out = report_of(in_order);
  const auto& records = in_order.records;
  std::optional<reference_key> key;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    if (i == 0 || r.key != records[i - 1].key) key.emplace(p);
    ++out.judged;
    const bool exact_admits = key->decide(r.time_ms, r.cost).allowed;
    if (r.allowed) {
      if (!exact_admits) ++out.wrongly_admitted;
      key->record(r.time_ms, r.cost);
    } else if (exact_admits) {
      ++out.wrongly_denied;
    }
  }
  return out;
}

std::int64_t reservation_extra_burst(const policy& p) {
  if (p.reserve() == 0 || !takes_burst(p.algo())) return 0;
  const std::int64_t w = p.window().count();
  // The spend span as the reserve step answers it (core::spend_span; tools see only the API).
  const std::int64_t span = std::max<std::int64_t>(1, p.burst() * w / (10 * p.limit()));
  const std::int64_t d = std::min<std::int64_t>(p.reserve_for().count(), span);
  return (p.limit() * d + w - 1) / w;
}

replay_report replay_own_definition_and_bound(const policy& p, const judging_order& records) {
  replay_report out = replay_own_definition(p, records);
  out.bound_extra_burst = reservation_extra_burst(p);
  out.beyond_bound = out.bound_extra_burst == 0
                         ? out.wrongly_admitted
                         : replay_own_definition(policy{p.name(), p.algo(), p.limit(), p.window(),
                                                        p.burst() + out.bound_extra_burst},
                                                 records)
                               .wrongly_admitted;
  return out;
}

replay_report replay_sliding_log(std::int64_t limit, std::int64_t window_ms,
                                 const judging_order& in_order) {
  replay_report out = report_of(in_order);
  const auto& records = in_order.records;

  double over_sum = 0;
  std::deque<std::pair<std::int64_t, std::int64_t>> live;  // admitted (time, cost) in the window
  std::int64_t live_cost = 0;
  bool have_window = false;
  std::int64_t window_index = 0, window_over = 0;
  auto close_window = [&] {
    if (!have_window) return;
    ++out.key_windows;
    if (window_over > 0) ++out.key_windows_over;
    over_sum += static_cast<double>(window_over);
    out.max_over_admission = std::max(out.max_over_admission, window_over);
    have_window = false;
  };

  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    if (i == 0 || r.key != records[i - 1].key) {
      close_window();
      live.clear();
      live_cost = 0;
    }
    // Entries at t <= now − W have aged out (the window is (now − W, now]).
    while (!live.empty() && live.front().first <= r.time_ms - window_ms) {
      live_cost -= live.front().second;
      live.pop_front();
    }
    ++out.judged;
    const bool exact_admits = live_cost + r.cost <= limit;
    if (!r.allowed) {
      if (exact_admits) ++out.wrongly_denied;
      continue;
    }
    if (!exact_admits) ++out.wrongly_admitted;
    live.emplace_back(r.time_ms, r.cost);
    live_cost += r.cost;
    const auto index = floor_div(r.time_ms, window_ms);
    if (!have_window || index != window_index) {
      close_window();
      have_window = true;
      window_index = index;
      window_over = 0;
    }
    window_over = std::max(window_over, live_cost - limit);
  }
  close_window();
  out.mean_over_admission = out.key_windows ? over_sum / static_cast<double>(out.key_windows) : 0;
  return out;
}

replay_report replay_own_definition(const policy& p, std::vector<decision_record> records,
                                    std::int64_t cutoff_ms) {
  return replay_own_definition(p, in_judging_order(std::move(records), cutoff_ms));
}

replay_report replay_sliding_log(std::int64_t limit, std::int64_t window_ms,
                                 std::vector<decision_record> records, std::int64_t cutoff_ms) {
  return replay_sliding_log(limit, window_ms, in_judging_order(std::move(records), cutoff_ms));
}

}  // namespace floodgate::bench
