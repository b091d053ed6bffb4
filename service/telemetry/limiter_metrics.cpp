#include "telemetry/limiter_metrics.hpp"

#include <cstdint>

#include "telemetry/prometheus_text.hpp"

namespace floodgate::service {

void append_limiter_metrics(std::string& out, limiter& l) {
  auto family = [&out](const char* name, metric_type type, const char* help, std::uint64_t v) {
    prometheus_family(out, name, type, help).sample(v);
  };
  constexpr auto counter = metric_type::counter;
  constexpr auto gauge = metric_type::gauge;
  const auto s = l.get_backend().stats();
  family("floodgate_backend_redirections_total", counter,
         "Calls re-sent elsewhere: MOVED/ASK (Cluster), READONLY (Sentinel).", s.redirections);
  family("floodgate_backend_failovers_total", counter,
         "Failovers the backend noticed (a master lost its slots, or a new primary).",
         s.failovers_seen);
  family("floodgate_backend_breaker_opens_total", counter, "Times a node's circuit breaker opened.",
         s.breaker_opens);
  family("floodgate_backend_breakers_open", gauge, "Nodes whose circuit breaker is open now.",
         s.breakers_open);
  family("floodgate_backend_nodes_retired_total", counter,
         "Redis Cluster nodes dropped after leaving the slot map.", s.nodes_retired);
  family("floodgate_backend_nodes", gauge,
         "Redis Cluster nodes the client keeps connections to now.", s.nodes_known);
  family("floodgate_backend_script_reloads_total", counter,
         "Scripts loaded again after NOSCRIPT (Redis restart, failover, SCRIPT FLUSH).",
         s.script_reloads);
  const auto local = l.stats();
  family("floodgate_local_denials_total", counter,
         "Checks denied in this process, without a backend call, until a denial's retry_after.",
         local.local_denials);
  family("floodgate_local_denial_entries", gauge, "Denials remembered for that now (bounded).",
         local.local_denial_entries);
  family("floodgate_local_mode_decisions_total", counter,
         "Checks of failure_mode: local rules decided in this process while the backend "
         "could not answer.",
         local.local_mode_decisions);
  family("floodgate_local_mode_active", gauge,
         "1 while this instance decides failure_mode: local rules locally (an outage).",
         local.local_mode_active ? 1 : 0);
  family("floodgate_reservations_total", counter,
         "Reservations taken for rules with reserve (one backend call each).",
         local.reservations);
  family("floodgate_reserved_units_total", counter, "Units those reservations granted.",
         local.reserved_units);
  family("floodgate_reserved_decisions_total", counter,
         "Checks admitted from reserved units, without a backend call.",
         local.reserved_decisions);
  family("floodgate_reserved_units_given_back_total", counter,
         "Reserved units not spent and returned to their window (a grant ended early).",
         local.reserved_units_given_back);
  // The same per rule (bounded by the rules: the library counts at most 1024 names).
  const auto rules = l.reservation_stats();
  auto by_rule = [&](const char* name, const char* help, auto field) {
    prometheus_family f(out, name, counter, help);
    for (const auto& r : rules) f.sample({{"rule", r.rule}}, r.*field);
  };
  by_rule("floodgate_rule_reservations_total", "Reservations taken, per rule with reserve.",
          &rule_reservation_stats::reservations);
  by_rule("floodgate_rule_reserved_units_total", "Units those reservations granted, per rule.",
          &rule_reservation_stats::reserved_units);
  by_rule("floodgate_rule_reserved_decisions_total",
          "Checks admitted from reserved units without a backend call, per rule.",
          &rule_reservation_stats::reserved_decisions);
  by_rule("floodgate_rule_reserved_units_given_back_total",
          "Reserved units not spent and returned to their window, per rule.",
          &rule_reservation_stats::reserved_units_given_back);
  family("floodgate_instances", gauge,
         "Instances sharing the backend, as local mode divides limits (heartbeats or "
         "--instances).",
         static_cast<std::uint64_t>(local.instances));
  family("floodgate_backend_keys", gauge, "Keys the memory backend holds now (at most max_keys).",
         s.keys);
  family("floodgate_backend_evictions_total", counter,
         "Live keys the memory backend dropped at max_keys (each starts again at full "
         "capacity).",
         s.evictions);
}

void append_backend_ready(std::string& out, limiter& l) {
  prometheus_family(out, "floodgate_backend_ready", metric_type::gauge,
                    "1 while the backend can serve calls (/readyz 200).")
      .sample(l.get_backend().healthy() ? 1 : 0);
}

}  // namespace floodgate::service
