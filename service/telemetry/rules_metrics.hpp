// /metrics families for where the rules come from (rules/rules_state.hpp), so an instance
// stuck on an old version is visible across a fleet:
//
//   floodgate_rules_version{source="redis://127.0.0.1:6379#prod"} 7
//   floodgate_rules_latest_version{source="..."} 8             (newest seen in Redis)
//   floodgate_rules_apply_failures_total{source="..."} 1     (versions refused as invalid)
//   floodgate_rules_source_up{source="..."} 1                 (the last read of Redis answered)
//   floodgate_runtime_overrides{source="..."} 2               (run-time overrides live now)
//
// Nothing for --config FILE (its reloads are floodgate_config_reloads_total).
#pragma once

#include <string>

#include "rules/rules_state.hpp"

namespace floodgate::service {

void append_rules_metrics(std::string& out, const rules_state& s);

}  // namespace floodgate::service
