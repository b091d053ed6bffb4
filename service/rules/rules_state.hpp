// Where the rules in force came from and how current they are: what /v1/status, the status
// page and /metrics show, so an instance stuck on an old version is visible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace floodgate::service {

struct rules_state {
  bool from_redis = false;           // --rules-from; false: --config FILE (or no rules)
  std::string where;                 // "redis://127.0.0.1:6379#prod" (no password) or the file
  std::int64_t version = 0;          // in force (from_redis only)
  std::int64_t latest = 0;           // the newest version seen in Redis (> version: refused)
  std::string refused;               // why `latest` is not in force, as logged
  std::string redis_error;           // the last read of Redis failed: why (empty: it answers)
  bool subscribed = false;           // told of pushes at once (else: the version read every 200 ms)
  std::int64_t applied_at_ms = 0;    // unix ms when `version` came into force
  std::int64_t checked_at_ms = 0;    // unix ms of the last successful read of Redis
  std::uint64_t apply_failures = 0;  // versions refused (invalid) since start
  std::size_t runtime_overrides = 0;   // run-time overrides live now (floodgate override set)
  std::int64_t overrides_version = 0;  // of the run-time overrides applied (0: none ever set)
};

}  // namespace floodgate::service
