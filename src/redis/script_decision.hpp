// A decision as the scripts answer it (docs/algorithms.md): allowed (0/1), limit, remaining,
// reset_after_ms, retry_after_ms (-1: never), or nothing when the numbers cannot be one. The one
// reading of those numbers, for the five-integer replies (redis_backend.cpp), the batch's
// two or three (batch.cpp) and a lone check's (lua/single.lua: lone_decision).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include "floodgate/decision.hpp"

namespace floodgate::redis {

inline std::optional<decision> script_decision(std::int64_t allowed, std::int64_t limit,
                                               std::int64_t remaining, std::int64_t reset_after,
                                               std::int64_t retry_after) noexcept {
  if ((allowed != 0 && allowed != 1) || limit < 0 || remaining < 0 || reset_after < 0 ||
      retry_after < -1)
    return std::nullopt;
  decision d;
  d.allowed = allowed == 1;
  d.limit = limit;
  d.remaining = remaining;
  d.reset_after = std::chrono::milliseconds(reset_after);
  d.retry_after = retry_after == -1 ? decision::never : std::chrono::milliseconds(retry_after);
  return d;
}

// A lone check's reply (lua/single.lua) as its integers, for a policy of capacity (burst)
// `capacity`: one integer remaining + (capacity + 1) x reset_after when allowed (`packed`: the
// reply was an integer), else the batch item's {remaining, reset_after} when allowed or
// {-1 - remaining, reset_after, retry_after} when denied.
inline std::optional<decision> lone_decision(std::int64_t capacity, bool packed,
                                             std::span<const std::int64_t> v) noexcept {
  if (capacity < 1) return std::nullopt;
  if (packed) {
    if (v.size() != 1 || v[0] < 0) return std::nullopt;
    return script_decision(1, capacity, v[0] % (capacity + 1), v[0] / (capacity + 1), 0);
  }
  if (v.size() == 2 && v[0] >= 0) return script_decision(1, capacity, v[0], v[1], 0);
  if (v.size() == 3 && v[0] < 0) return script_decision(0, capacity, -1 - v[0], v[1], v[2]);
  return std::nullopt;
}

}  // namespace floodgate::redis
