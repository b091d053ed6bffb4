// What a check answers.
//
// A check has four outcomes (Envoy's three plus a rejected request): allowed, over_limit,
// backend_error, invalid_request. `decision.allowed` is always the verdict to apply: for a
// backend error it follows the policy's failure mode, and `degraded()` tells the two apart.
//
//   auto r = limiter.check(user_id, api);
//   if (!r.decision.allowed) return reply_429(r.decision.retry_after);
//   if (r.degraded()) metrics.count_degraded();
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <system_error>
#include <vector>

namespace floodgate {

struct decision {
  // retry_after when the request can never succeed (its cost exceeds the capacity).
  static constexpr std::chrono::milliseconds never{std::numeric_limits<std::int64_t>::max()};

  bool allowed = false;
  std::int64_t limit = 0;       // the policy's capacity (limit, or burst for bucket/gcra)
  std::int64_t remaining = 0;   // cost that could still be admitted right now
  std::chrono::milliseconds reset_after{0};  // until the full capacity is back (0: it is)
  std::chrono::milliseconds retry_after{0};  // 0 when allowed; else until this request can pass

  friend bool operator==(const decision&, const decision&) = default;
};

enum class outcome {
  allowed,          // admitted; consumed `cost`
  over_limit,       // denied; consumed nothing
  backend_error,    // the backend failed; `decision` follows the policy's failure mode
  invalid_request,  // the request itself is wrong (empty key, bad cost); nothing consumed
};

const char* to_string(outcome o) noexcept;

struct check_result {
  floodgate::outcome outcome = floodgate::outcome::invalid_request;
  floodgate::decision decision;
  std::error_code error;  // set for backend_error and invalid_request
  // An over_limit decided in this process from an earlier denial, without a backend call.
  bool local = false;
  // Decided in this process at limit ÷ N because the backend could not answer (the policy's
  // failure_mode::local); outcome is allowed or over_limit, error the backend's failure.
  bool local_mode = false;
  // Admitted from units this process reserved earlier (policy::reserve), without a backend
  // call; decision.remaining then counts the key's units left at the reservation plus this
  // process's unspent ones.
  bool reserved = false;
  // limiter::refund: the cost given back, 0..cost; 0 when the state held none of it (nothing
  // consumed, or all of it back already). A part of a unit (token_bucket, gcra) counts as one.
  std::int64_t refunded = 0;
  // limiter::refund: its idempotency key was used already; `refunded` is what that first refund
  // gave back, and nothing came back now.
  bool replayed = false;

  // Admitted only because the backend failed and the policy fails open, or decided in local
  // mode.
  bool degraded() const noexcept {
    return (outcome == floodgate::outcome::backend_error && decision.allowed) || local_mode;
  }
};

// check_all: one decision per item, in order, and the combined outcome. All items were
// admitted (and consumed) or none was.
struct multi_check_result {
  floodgate::outcome outcome = floodgate::outcome::invalid_request;
  std::vector<floodgate::decision> decisions;
  std::error_code error;
  // A one-item call denied in this process from an earlier denial (as check_result::local).
  bool local = false;
  // Decided in this process at limit ÷ N (as check_result::local_mode).
  bool local_mode = false;

  // The verdict to apply: every decision allowed (for a backend error, every policy fails open).
  bool allowed() const noexcept {
    if (outcome == floodgate::outcome::invalid_request || decisions.empty()) return false;
    for (const auto& d : decisions)
      if (!d.allowed) return false;
    return true;
  }
};

}  // namespace floodgate
