// What a failed backend call answers (docs/operations.md, failure modes): the backend refused
// the request itself (no failure mode applies), or it failed and the policy's failure mode
// decides. One place, for the limiter's checks and for reservations taken on their behalf.
#pragma once

#include <system_error>

#include "floodgate/decision.hpp"
#include "floodgate/errors.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::detail {

// What a backend failure means for one policy: its failure mode decides.
inline decision failure_decision(const policy& p) {
  decision d;
  d.allowed = p.on_failure() == failure_mode::open;
  d.limit = p.capacity();
  return d;
}

// A refused request (cross_slot, a bad argument) is invalid; anything else is the backend's.
inline outcome failed_outcome(std::error_code ec) noexcept {
  return is_backend_error(ec) ? outcome::backend_error : outcome::invalid_request;
}

// A failed one-item call: `on_failure` (failure_decision, kept from before the call) answers a
// backend error.
inline check_result failed_check(std::error_code ec, const decision& on_failure) {
  check_result r;
  r.outcome = failed_outcome(ec);
  r.error = ec;
  if (r.outcome == outcome::backend_error) r.decision = on_failure;
  return r;
}

}  // namespace floodgate::detail
