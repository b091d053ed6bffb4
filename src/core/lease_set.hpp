// lease_set: the live leases of one concurrency-limited key (docs/algorithms.md, "Concurrency
// limits"): at most `limit` at once, each until its expiry, so a crashed holder's slot comes
// back by itself. Pure, like the algorithms' step functions: time is passed in.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "floodgate/decision.hpp"

namespace floodgate::core {

struct lease_set {
  std::map<std::string, std::int64_t, std::less<>> leases;  // id → expiry (ms)
};

// Takes a slot for `id` until now + ttl if fewer than `limit` leases are live (expired ones
// are dropped first). The decision: remaining = free slots after, reset_after = until every
// lease has expired, retry_after when refused = until the earliest expires (a slot is free
// then at the latest; a release frees one sooner).
decision acquire(lease_set& s, std::int64_t now, std::int64_t limit, std::int64_t ttl,
                 std::string_view id);
// Ends (ttl = 0) or extends to now + ttl the live lease `id`; false, changing nothing live,
// when it is not live: released already, expired, or never this key's.
bool release_or_renew(lease_set& s, std::int64_t now, std::string_view id, std::int64_t ttl);
// Until the newest lease expires (0: none live): how long the set matters.
std::int64_t expiry(const lease_set& s, std::int64_t now);

}  // namespace floodgate::core
