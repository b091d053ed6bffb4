#include "core/reserve.hpp"

#include <algorithm>

namespace floodgate::core {

std::int64_t reserve(any_state& s, std::int64_t now, const params& p, std::int64_t wanted) {
  const std::int64_t grant = std::min(wanted, decide(s, now, p, 0).remaining);
  if (grant <= 0 || !decide(s, now, p, grant).allowed) return 0;
  commit(s, now, p, grant);
  return grant;
}

}  // namespace floodgate::core
