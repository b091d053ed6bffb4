#include "telemetry/metrics.hpp"

#include "floodgate/errors.hpp"
#include "telemetry/prometheus_text.hpp"

namespace floodgate::service {
namespace {

constexpr std::array<std::string_view, 8> error_kind_names = {
    "timeout",      "not_connected",  "server_busy",   "out_of_memory",
    "server_error", "protocol_error", "shutting_down", "other"};

std::size_t error_kind(std::error_code ec) {
  if (ec.category() == error_category()) {
    const int first = static_cast<int>(errc::timeout);
    const int v = ec.value();
    if (v >= first && v <= static_cast<int>(errc::shutting_down))
      return static_cast<std::size_t>(v - first);
  }
  return error_kind_names.size() - 1;
}

}  // namespace

std::string_view to_string(verdict v) noexcept {
  constexpr std::array<std::string_view, verdict_count> names = {
      "allowed", "denied", "degraded", "failed", "invalid", "local_allowed", "local_denied"};
  return names[static_cast<std::size_t>(v)];
}

verdict verdict_of(const multi_check_result& r) noexcept {
  if (r.local_mode) return r.allowed() ? verdict::local_allowed : verdict::local_denied;
  switch (r.outcome) {
    case outcome::allowed:
      return verdict::allowed;
    case outcome::over_limit:
      return verdict::denied;
    case outcome::backend_error:
      return r.allowed() ? verdict::degraded : verdict::failed;
    case outcome::invalid_request:
      break;
  }
  return verdict::invalid;
}

namespace {

// The operations a lease call has, and the outcomes each can end in (the series rendered).
constexpr std::array<std::string_view, 3> lease_operation_names = {"acquire", "release", "renew"};
constexpr std::array<std::string_view, lease_outcome_count> lease_outcome_names = {
    "granted", "refused", "degraded", "released", "renewed", "not_held", "failed", "invalid"};
constexpr bool lease_outcome_of(std::size_t op, std::size_t outcome) {
  const auto o = static_cast<lease_outcome>(outcome);
  if (o == lease_outcome::failed || o == lease_outcome::invalid) return true;
  switch (static_cast<lease_operation>(op)) {
    case lease_operation::acquire:
      return o == lease_outcome::granted || o == lease_outcome::refused ||
             o == lease_outcome::degraded;
    case lease_operation::release:
      return o == lease_outcome::released || o == lease_outcome::not_held;
    case lease_operation::renew:
      return o == lease_outcome::renewed || o == lease_outcome::not_held;
  }
  return false;
}
constexpr std::array<std::string_view, 6> refund_result_names = {
    "refunded", "failed", "invalid", "unknown", "nothing_to_refund", "replayed"};

// Rules are few and never forgotten (counters must not go backwards across reloads); a map's
// elements never move, so the reference outlives the lock.
template <class Counters>
Counters& entry_of(std::shared_mutex& m, std::map<std::string, Counters, std::less<>>& map,
                   std::string_view rule) {
  {
    std::shared_lock lock(m);
    if (auto it = map.find(rule); it != map.end()) return it->second;
  }
  std::unique_lock lock(m);
  return map.try_emplace(std::string(rule)).first->second;
}

}  // namespace

metrics::rule_counters& metrics::counters_of(std::string_view rule) {
  return entry_of(decisions_mutex_, decisions_, rule);
}

void metrics::record_lease(std::string_view rule, lease_operation op, lease_outcome o) {
  auto& c = entry_of(decisions_mutex_, leases_, rule);
  c.calls[static_cast<std::size_t>(op) * lease_outcome_count + static_cast<std::size_t>(o)]
      .fetch_add(1, std::memory_order_relaxed);
}

void metrics::record_refund(std::string_view rule, refund_result r, std::int64_t given) {
  auto& c = entry_of(decisions_mutex_, refunds_, rule);
  c.results[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  if (r == refund_result::refunded && given > 0)
    c.cost.fetch_add(static_cast<std::uint64_t>(given), std::memory_order_relaxed);
}

void metrics::record_rule(std::string_view rule, verdict v, std::int64_t cost, const decision* d,
                          bool shadow_denied, bool overridden) {
  auto& c = counters_of(rule);
  c.verdicts[static_cast<std::size_t>(v)].fetch_add(1, std::memory_order_relaxed);
  if ((v == verdict::allowed || v == verdict::local_allowed) && cost > 0)
    c.cost.fetch_add(static_cast<std::uint64_t>(cost), std::memory_order_relaxed);
  // remaining < 10 % of the capacity, in integers: remaining * 10 < limit.
  if (v == verdict::allowed && d && d->limit > 0 && d->remaining < d->limit &&
      d->remaining * 10 < d->limit)
    c.near_limit.fetch_add(1, std::memory_order_relaxed);
  if (shadow_denied) c.shadow_denied.fetch_add(1, std::memory_order_relaxed);
  if (overridden) c.overridden.fetch_add(1, std::memory_order_relaxed);
}

void metrics::histogram::observe(std::chrono::nanoseconds latency) noexcept {
  const double seconds = std::chrono::duration<double>(latency).count();
  std::size_t bucket = 0;
  while (bucket < latency_buckets.size() && seconds > latency_buckets[bucket]) ++bucket;
  counts[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(static_cast<std::uint64_t>(latency.count() > 0 ? latency.count() : 0),
                   std::memory_order_relaxed);
}

metrics::latency_snapshot metrics::histogram::snapshot() const noexcept {
  latency_snapshot s;
  for (std::size_t b = 0; b < s.counts.size(); ++b)
    s.counts[b] = counts[b].load(std::memory_order_relaxed);
  s.sum_seconds = static_cast<double>(sum_ns.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

void metrics::record_backend_call(std::chrono::nanoseconds latency, std::error_code error) {
  if (error) backend_errors_[error_kind(error)].fetch_add(1, std::memory_order_relaxed);
  latency_.observe(latency);
}

void metrics::record_algorithm_latency(std::optional<algorithm> algo,
                                       std::chrono::nanoseconds latency) noexcept {
  const auto i = algo ? static_cast<std::size_t>(*algo) : algorithm_labels - 1;
  algorithm_latency_[i].observe(latency);
}

void metrics::record_response(int status) noexcept {
  std::size_t i = 0;
  while (i + 1 < statuses.size() && statuses[i] != status) ++i;
  responses_[i].fetch_add(1, std::memory_order_relaxed);
}

void metrics::record_reload(bool ok) noexcept {
  (ok ? reloads_ok_ : reloads_failed_).fetch_add(1, std::memory_order_relaxed);
}

void metrics::record_connection_cap(connection_cap cap, cap_action action) noexcept {
  connection_caps_[static_cast<std::size_t>(cap) * 2 + static_cast<std::size_t>(action)].fetch_add(
      1, std::memory_order_relaxed);
}

void metrics::add_collector(collector c) {
  std::lock_guard lock(collectors_mutex_);
  collectors_.push_back(std::move(c));
}

std::string metrics::render() const {
  std::string out;
  out.reserve(4096);
  auto load = [](const counter& c) { return c.load(std::memory_order_relaxed); };

  {
    std::shared_lock lock(decisions_mutex_);
    prometheus_family decisions(out, "floodgate_decisions_total", metric_type::counter,
                                "Checks decided, by rule and result (a multi-rule check counts "
                                "once per rule, with the combined result).");
    for (const auto& [rule, counts] : decisions_)
      for (std::size_t v = 0; v < verdict_count; ++v)
        decisions.sample({{"rule", rule}, {"result", to_string(static_cast<verdict>(v))}},
                         load(counts.verdicts[v]));
    const struct {
      const char* name;
      counter rule_counters::*field;
      const char* help;
    } per_rule[] = {
        {"floodgate_cost_consumed_total", &rule_counters::cost,
         "Cost charged against the rule's limit by admitted checks (allowed, local_allowed)."},
        {"floodgate_near_limit_total", &rule_counters::near_limit,
         "Checks admitted that left less than 10 % of the rule's capacity (keys close to being "
         "refused)."},
        {"floodgate_shadow_denied_total", &rule_counters::shadow_denied,
         "Checks of a shadow rule that were over the limit and answered as allowed."},
        {"floodgate_override_decisions_total", &rule_counters::overridden,
         "Checks decided with a per-key override of the rule (counted in "
         "floodgate_decisions_total too)."}};
    for (const auto& f : per_rule) {
      prometheus_family family(out, f.name, metric_type::counter, f.help);
      for (const auto& [rule, counts] : decisions_)
        family.sample({{"rule", rule}}, load(counts.*f.field));
    }

    prometheus_family leases(out, "floodgate_lease_operations_total", metric_type::counter,
                             "Calls of concurrency-limit rules (/v1/acquire, /v1/release, "
                             "/v1/renew), by operation and outcome.");
    for (const auto& [rule, counts] : leases_)
      for (std::size_t op = 0; op < lease_operation_names.size(); ++op)
        for (std::size_t o = 0; o < lease_outcome_count; ++o)
          if (lease_outcome_of(op, o))
            leases.sample({{"rule", rule},
                           {"operation", lease_operation_names[op]},
                           {"outcome", lease_outcome_names[o]}},
                          load(counts.calls[op * lease_outcome_count + o]));

    prometheus_family refunds(out, "floodgate_refunds_total", metric_type::counter,
                              "Refunds (/v1/refund), by rule and result.");
    for (const auto& [rule, counts] : refunds_)
      for (std::size_t r = 0; r < refund_result_names.size(); ++r)
        refunds.sample({{"rule", rule}, {"result", refund_result_names[r]}},
                       load(counts.results[r]));
    prometheus_family refunded(out, "floodgate_cost_refunded_total", metric_type::counter,
                               "Cost given back by refunds (what the key held of the cost asked; "
                               "a replay is not counted again).");
    for (const auto& [rule, counts] : refunds_)
      refunded.sample({{"rule", rule}}, load(counts.cost));
  }

  prometheus_family errors(out, "floodgate_backend_errors_total", metric_type::counter,
                           "Backend calls that failed, by kind.");
  for (std::size_t k = 0; k < error_kinds; ++k)
    errors.sample({{"kind", error_kind_names[k]}}, load(backend_errors_[k]));

  const auto latency = latency_.snapshot();
  prometheus_family(out, "floodgate_backend_latency_seconds", metric_type::histogram,
                    "Time from asking the backend to its answer.")
      .histogram({}, latency_buckets, latency.counts, latency.sum_seconds);

  prometheus_family by_algorithm(out, "floodgate_backend_latency_by_algorithm_seconds",
                                 metric_type::histogram,
                                 "Time from asking the backend to its answer, by the algorithm "
                                 "of the check's rules (mixed: several); local denials, which "
                                 "ask nothing, are not counted.");
  for (std::size_t a = 0; a < algorithm_labels; ++a) {
    const auto name =
        a + 1 < algorithm_labels ? to_string(static_cast<algorithm>(a)) : std::string_view("mixed");
    const auto h = algorithm_latency_[a].snapshot();
    by_algorithm.histogram({{"algorithm", name}}, latency_buckets, h.counts, h.sum_seconds);
  }

  prometheus_family responses(out, "floodgate_http_responses_total", metric_type::counter,
                              "HTTP responses sent, by status code.");
  for (std::size_t i = 0; i < statuses.size(); ++i)
    responses.sample({{"code", statuses[i] ? std::to_string(statuses[i]) : "other"}},
                     load(responses_[i]));

  prometheus_family(out, "floodgate_open_connections", metric_type::gauge,
                    "HTTP connections currently open.")
      .sample(open_connections_.load(std::memory_order_relaxed));

  prometheus_family caps(out, "floodgate_connection_cap_total", metric_type::counter,
                         "New connections that met a connection cap (per peer address, or "
                         "global), by what was done: the longest-idle keep-alive connection "
                         "closed to make room, or the new one refused with a 503.");
  for (std::size_t cap = 0; cap < 2; ++cap)
    for (std::size_t action = 0; action < 2; ++action)
      caps.sample({{"cap", cap == 0 ? "per_peer" : "global"},
                   {"action", action == 0 ? "closed_idle" : "refused"}},
                  load(connection_caps_[cap * 2 + action]));

  prometheus_family reloads(out, "floodgate_config_reloads_total", metric_type::counter,
                            "Configuration reloads (SIGHUP), by result; a failed reload keeps "
                            "the old rules.");
  reloads.sample({{"result", "success"}}, load(reloads_ok_));
  reloads.sample({{"result", "failure"}}, load(reloads_failed_));

  std::lock_guard lock(collectors_mutex_);
  for (const auto& c : collectors_) c(out);
  return out;
}

std::optional<metrics::rule_snapshot> metrics::rule_counts(std::string_view rule) const {
  std::shared_lock lock(decisions_mutex_);
  const auto it = decisions_.find(rule);
  if (it == decisions_.end()) return std::nullopt;
  const auto& c = it->second;
  rule_snapshot s;
  for (std::size_t v = 0; v < verdict_count; ++v)
    s.verdicts[v] = c.verdicts[v].load(std::memory_order_relaxed);
  s.cost = c.cost.load(std::memory_order_relaxed);
  s.near_limit = c.near_limit.load(std::memory_order_relaxed);
  s.shadow_denied = c.shadow_denied.load(std::memory_order_relaxed);
  s.overridden = c.overridden.load(std::memory_order_relaxed);
  return s;
}

metrics::latency_snapshot metrics::backend_latency() const {
  return latency_.snapshot();
}

std::vector<std::pair<std::string_view, std::uint64_t>> metrics::backend_errors() const {
  std::vector<std::pair<std::string_view, std::uint64_t>> out;
  for (std::size_t k = 0; k < error_kinds; ++k)
    out.emplace_back(error_kind_names[k], backend_errors_[k].load(std::memory_order_relaxed));
  return out;
}

}  // namespace floodgate::service
