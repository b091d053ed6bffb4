// GET /v1/status on the admin listener: what the status page (/ui) shows, as JSON, from the
// counters /metrics renders. Counters are cumulative; a poller derives rates from two polls.
//
//   {"now_ms": unix ms, "uptime_s": 12.5,
//    "rules": [{"name", "algorithm", "limit", "window_ms", "shadow",
//               "decisions": {"allowed": n, "denied": n, ...every verdict},
//               "cost", "near_limit", "shadow_denied"}...],          (file order)
//    "backend": {"kind", "healthy", "last_error", "calls", "errors": {"timeout": n, ...},
//                "latency_mean_ms", "latency_p99_ms"},                  (null before a call)
//    "clock": [{"node", "up", "offset_ms", "rtt_ms"}...],               (Redis nodes sampled)
//    "rules_source": {"from": "file"|"redis", "where", "version" (null for a file),
//                     "latest", "refused", "redis_error", "subscribed", "applied_at_ms",
//                     "checked_at_ms", "apply_failures", "runtime_overrides" (live now),
//                     "overrides_version"},                  (rules/rules_state.hpp)
//    "top_keys": {"enabled", "capacity", "interval_ms"}}
//
// Size: bounded by the rules in the config, the sampled nodes of the URL and fixed fields.
#pragma once

#include "admin/admin_sources.hpp"
#include "api/http_message.hpp"
#include "telemetry/metrics.hpp"

namespace floodgate::service {

http_response render_status(const admin_sources& sources);

// The q-quantile (0 < q <= 1) of a latency histogram in seconds, interpolated linearly inside
// the bucket that holds it (as Prometheus's histogram_quantile does); a quantile in the +Inf
// bucket is reported as the largest finite bound. -1 when the histogram is empty.
double histogram_quantile(const metrics::latency_snapshot& h, double q);

}  // namespace floodgate::service
