#include "core/lease_set.hpp"

#include <algorithm>

#include "core/params.hpp"

namespace floodgate::core {
namespace {

void drop_expired(lease_set& s, std::int64_t now) {
  std::erase_if(s.leases, [now](const auto& kv) { return kv.second <= now; });
}

}  // namespace

std::int64_t expiry(const lease_set& s, std::int64_t now) {
  std::int64_t newest = now;
  for (const auto& kv : s.leases) newest = std::max(newest, kv.second);
  return newest - now;
}

decision acquire(lease_set& s, std::int64_t now, std::int64_t limit, std::int64_t ttl,
                 std::string_view id) {
  drop_expired(s, now);
  const auto held = static_cast<std::int64_t>(s.leases.size());
  if (held < limit) {
    s.leases.emplace(std::string(id), now + ttl);
    return make_decision(true, limit, limit - held - 1, expiry(s, now), 0);
  }
  std::int64_t oldest = s.leases.begin()->second;
  for (const auto& kv : s.leases) oldest = std::min(oldest, kv.second);
  return make_decision(false, limit, 0, expiry(s, now), oldest - now);
}

bool release_or_renew(lease_set& s, std::int64_t now, std::string_view id, std::int64_t ttl) {
  const auto it = s.leases.find(id);
  if (it == s.leases.end()) return false;
  if (it->second <= now) {  // expired: its slot came back already
    s.leases.erase(it);
    return false;
  }
  if (ttl == 0)
    s.leases.erase(it);
  else
    it->second = now + ttl;
  return true;
}

}  // namespace floodgate::core
