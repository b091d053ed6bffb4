#include "core/token_bucket.hpp"

#include <algorithm>

namespace floodgate::core {
namespace {

std::int64_t level_now(const token_bucket_state& s, std::int64_t now, const params& p) {
  const std::int64_t capacity = p.burst * p.window;
  if (!s.present) return capacity;
  const std::int64_t missing = capacity - s.level;
  const std::int64_t elapsed = std::max<std::int64_t>(0, now - s.updated);
  // Compare before multiplying: an idle key's elapsed * limit could overflow.
  if (elapsed >= ceil_div(missing, p.limit)) return capacity;
  return s.level + elapsed * p.limit;
}

}  // namespace

decision decide(const token_bucket_state& s, std::int64_t now, const params& p,
                std::int64_t cost) {
  const std::int64_t w = p.window, capacity = p.burst * w;
  const std::int64_t level = level_now(s, now, p);
  if (cost > p.burst)
    return make_decision(false, p.burst, level / w, ceil_div(capacity - level, p.limit), -1);
  const bool allowed = level >= cost * w;
  const std::int64_t after = level - (allowed ? cost * w : 0);
  return make_decision(allowed, p.burst, after / w, ceil_div(capacity - after, p.limit),
                       allowed ? 0 : ceil_div(cost * w - level, p.limit));
}

void commit(token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t level = level_now(s, now, p);
  s.updated = s.present ? std::max(s.updated, now) : now;
  s.level = level - cost * p.window;
  s.present = true;
}

std::int64_t expiry(const token_bucket_state& s, std::int64_t now, const params& p) {
  return ceil_div(p.burst * p.window - level_now(s, now, p), p.limit);
}

}  // namespace floodgate::core
