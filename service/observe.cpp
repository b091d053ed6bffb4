#include "observe.hpp"

#include "hot_keys.hpp"

namespace floodgate::service {

void observe_backend_call(metrics& stats, const check_plan& plan, const multi_check_result& r,
                          std::chrono::nanoseconds latency) {
  if (r.outcome == outcome::invalid_request) return;
  const bool failed = r.outcome == outcome::backend_error || r.local_mode;
  stats.record_backend_call(latency, failed ? r.error : std::error_code{});
  if (r.local || plan.items.empty()) return;
  std::optional<algorithm> algo = plan.items.front().rule->policy.algo();
  for (const auto& item : plan.items)
    if (item.rule->policy.algo() != *algo) {
      algo.reset();
      break;
    }
  stats.record_algorithm_latency(algo, latency);
}

void observe_decision(metrics& stats, hot_keys* top, const check_plan& plan,
                      const multi_check_result& r) {
  const auto v = verdict_of(r);
  const bool decided = r.decisions.size() == plan.items.size() &&
                       r.outcome != outcome::backend_error && r.outcome != outcome::invalid_request;
  const bool denied = v == verdict::denied || v == verdict::local_denied;
  const auto now = top ? hot_keys::clock::now() : hot_keys::clock::time_point{};
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    const auto& item = plan.items[i];
    stats.record_rule(item.rule->name(), v, item.cost, decided ? &r.decisions[i] : nullptr,
                      item.rule->shadow && denied);
    if (top && v != verdict::invalid) top->record(item.rule->name(), item.key, denied, now);
  }
}

}  // namespace floodgate::service
