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

// After a backwards clock step the state's time is ahead of now: the refill resumes only then.
std::int64_t lag(const token_bucket_state& s, std::int64_t now) {
  return s.present ? std::max<std::int64_t>(0, s.updated - now) : 0;
}

// reset_after for a level now: until the bucket is full again.
std::int64_t until_full(std::int64_t level, std::int64_t g, const params& p) {
  const std::int64_t capacity = p.burst * p.window;
  return level >= capacity ? 0 : g + ceil_div(capacity - level, p.limit);
}

}  // namespace

decision decide(const token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t w = p.window;
  const std::int64_t level = level_now(s, now, p);
  const std::int64_t g = lag(s, now);
  if (cost > p.burst) return make_decision(false, p.burst, level / w, until_full(level, g, p), -1);
  const bool allowed = level >= cost * w;
  const std::int64_t after = level - (allowed ? cost * w : 0);
  return make_decision(allowed, p.burst, after / w, until_full(after, g, p),
                       allowed ? 0 : g + ceil_div(cost * w - level, p.limit));
}

void commit(token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  const std::int64_t level = level_now(s, now, p);
  s.updated = s.present ? std::max(s.updated, now) : now;
  s.level = level - cost * p.window;
  s.present = true;
}

std::int64_t expiry(const token_bucket_state& s, std::int64_t now, const params& p) {
  return until_full(level_now(s, now, p), lag(s, now), p);
}

}  // namespace floodgate::core
