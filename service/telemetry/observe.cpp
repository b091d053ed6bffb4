#include "telemetry/observe.hpp"

#include "api/render.hpp"
#include "telemetry/hot_keys.hpp"

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
                      item.rule->shadow && denied, item.rule->is_override);
    if (top && v != verdict::invalid) top->record(item.rule->name(), item.key, denied, now);
  }
}

void observe_lease(metrics& stats, const check_plan& plan, const acquire_result& r) {
  auto o = lease_outcome::invalid;
  switch (r.outcome) {
    case outcome::allowed:
      o = lease_outcome::granted;
      break;
    case outcome::over_limit:
      o = lease_outcome::refused;
      break;
    case outcome::backend_error:
      o = r.decision.allowed ? lease_outcome::degraded : lease_outcome::failed;
      break;
    case outcome::invalid_request:
      break;
  }
  stats.record_lease(plan.items.front().rule->name(), lease_operation::acquire, o);
}

void observe_lease(metrics& stats, const check_plan& plan, const lease_result& r) {
  const bool renew = plan.kind == check_plan::style::renew;
  const auto o = r.error
                     ? (is_backend_error(r.error) ? lease_outcome::failed : lease_outcome::invalid)
                 : r.done ? (renew ? lease_outcome::renewed : lease_outcome::released)
                          : lease_outcome::not_held;
  stats.record_lease(plan.items.front().rule->name(),
                     renew ? lease_operation::renew : lease_operation::release, o);
}

void observe_refund(metrics& stats, const check_plan& plan, const check_result& r) {
  auto result = r.outcome == outcome::allowed         ? refund_result::refunded
                : r.outcome == outcome::backend_error ? refund_result::failed
                                                      : refund_result::invalid;
  if (result == refund_result::failed && outcome_unknown(r.error)) result = refund_result::unknown;
  if (result == refund_result::refunded && r.replayed) result = refund_result::replayed;
  if (result == refund_result::refunded && r.refunded == 0)
    result = refund_result::nothing_to_refund;
  stats.record_refund(plan.items.front().rule->name(), result, r.refunded);
}

}  // namespace floodgate::service
