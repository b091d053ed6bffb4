// What a decided check tells the operator: counted per rule (metrics.hpp) and, when enabled,
// its keys fed to the hot-key sketches (hot_keys.hpp). Called by the server for every check;
// cheap: atomics, and one bounded sketch update per item when hot keys are on.
//
//   observe_backend_call(stats, plan, result, latency);   // in the backend's completion
//   observe_decision(stats, top, plan, result);            // before rendering
#pragma once

#include <chrono>

#include "api/route.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/semaphore.hpp"
#include "telemetry/metrics.hpp"

namespace floodgate::service {

class hot_keys;

// The latency of the backend call behind `r`, overall and by algorithm; nothing for an invalid
// request, and nothing by algorithm for a local denial (it asked nothing).
void observe_backend_call(metrics& stats, const check_plan& plan, const multi_check_result& r,
                          std::chrono::nanoseconds latency);

// Per rule: the verdict, cost charged, near-limit admissions, shadow denials; and the keys
// checked and denied into `top` (null: hot keys are off).
void observe_decision(metrics& stats, hot_keys* top, const check_plan& plan,
                      const multi_check_result& r);

// A concurrency limit's call (/v1/acquire; /v1/release or /v1/renew, from plan.kind), per rule.
void observe_lease(metrics& stats, const check_plan& plan, const acquire_result& r);
void observe_lease(metrics& stats, const check_plan& plan, const lease_result& r);

// A refund (/v1/refund), per rule: its result, and the cost it gave back.
void observe_refund(metrics& stats, const check_plan& plan, const check_result& r);

}  // namespace floodgate::service
