#include "ratelimit_headers.hpp"

#include <algorithm>

namespace floodgate::service {

std::int64_t ceil_seconds(std::chrono::milliseconds ms) noexcept {
  const auto v = std::max<std::int64_t>(ms.count(), 0);
  return v / 1000 + (v % 1000 != 0 ? 1 : 0);
}

// Policy names are [A-Za-z0-9_.-] (policy's constructor checks), so they need no escaping
// inside an sf-string.
std::string policy_member(const policy& p) {
  return "\"" + p.name() + "\";q=" + std::to_string(p.limit()) +
         ";w=" + std::to_string(std::max<std::int64_t>(1, ceil_seconds(p.window())));
}

std::string ratelimit_member(const policy& p, const decision& d) {
  return "\"" + p.name() + "\";r=" + std::to_string(d.remaining) +
         ";t=" + std::to_string(ceil_seconds(d.reset_after));
}

}  // namespace floodgate::service
