#include "telemetry/rules_metrics.hpp"

#include "telemetry/prometheus_text.hpp"

namespace floodgate::service {

void append_rules_metrics(std::string& out, const rules_state& s) {
  if (!s.from_redis) return;
  const metric_labels source = {{"source", s.where}};
  prometheus_family(out, "floodgate_rules_version", metric_type::gauge,
                    "The version of the rules document in force (--rules-from).")
      .sample(source, s.version);
  prometheus_family(out, "floodgate_rules_latest_version", metric_type::gauge,
                    "The newest version seen in Redis; above floodgate_rules_version when it "
                    "was refused.")
      .sample(source, s.latest);
  prometheus_family(out, "floodgate_rules_apply_failures_total", metric_type::counter,
                    "Versions of the rules document refused as invalid (the one in force "
                    "stayed).")
      .sample(source, s.apply_failures);
  prometheus_family(out, "floodgate_rules_source_up", metric_type::gauge,
                    "1 when the last read of the rules document's Redis answered.")
      .sample(source, s.redis_error.empty() ? 1 : 0);
  prometheus_family(out, "floodgate_runtime_overrides", metric_type::gauge,
                    "Run-time per-key overrides live now (floodgate override set).")
      .sample(source, s.runtime_overrides);
}

}  // namespace floodgate::service
