// Error codes of the request path, and the one exception type of start-up.
//
// Codes are grouped by what the caller should do next (Abseil's rule): fix the request,
// or treat the backend as failed and apply the policy's failure mode.
//
//   auto r = limiter.check("alice", api);
//   if (r.outcome == floodgate::outcome::invalid_request) log(r.error.message());
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace floodgate {

enum class errc {
  // The request is wrong: retrying the same request cannot help.
  empty_key = 1,
  key_too_long,
  invalid_cost,        // negative, or above the hard cap
  cost_exceeds_limit,  // larger than the policy's capacity: it could never be admitted
  too_many_items,      // check_all with more items than limiter_options::max_items
  duplicate_item,      // check_all naming the same (policy, key) twice
  no_items,            // check_all with nothing to check
  cross_slot,          // check_all on a Redis Cluster with items in different hash slots
  unsupported,         // the backend does not implement this call (refund, leases)
  invalid_lease,       // a lease id that no acquire could have made (empty, over 64 bytes)
  invalid_idempotency_key,  // a refund's idempotency key: not 1..64 of [A-Za-z0-9_.:-]
  // The backend failed: the policy's failure mode decides.
  timeout = 100,       // no answer within the deadline
  not_connected,       // no connection could be made, or it was lost mid-call
  server_busy,         // BUSY: another script is running too long
  out_of_memory,       // OOM: maxmemory reached and the policy rejects writes
  server_error,        // any other error reply
  protocol_error,      // a reply we could not parse, or over the size/depth caps
  shutting_down,       // the backend is being destroyed
  internal_error,      // the backend threw (e.g. std::bad_alloc): answered, never thrown
};

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// True for codes that mean "the backend failed" rather than "the request is wrong".
inline bool is_backend_error(std::error_code ec) noexcept {
  return ec.category() != error_category() || ec.value() >= static_cast<int>(errc::timeout);
}

// Thrown only while building things (a policy, options, a backend from a URL, a config):
// never on the request path.
class config_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace floodgate

template <>
struct std::is_error_code_enum<floodgate::errc> : std::true_type {};
