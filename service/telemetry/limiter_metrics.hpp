// The library's own counters as Prometheus families on /metrics: what the backend saw
// (backend::stats(): Cluster and Sentinel redirections, failovers and breakers, script reloads,
// the memory backend's keys), the limiter's local denials and local mode, and whether the
// backend can serve calls (/readyz as a gauge, for alerts).
//
//   stats.add_collector([l](std::string& out) { append_limiter_metrics(out, *l); });
//
// Thread-safe as the library's stats() and healthy() are: call them from any thread.
#pragma once

#include <string>

#include "floodgate/limiter.hpp"

namespace floodgate::service {

// floodgate_backend_* (zero where a backend has no such thing) and floodgate_local_*,
// floodgate_instances.
void append_limiter_metrics(std::string& out, limiter& l);

// floodgate_backend_ready: 1 while the backend is healthy.
void append_backend_ready(std::string& out, limiter& l);

}  // namespace floodgate::service
