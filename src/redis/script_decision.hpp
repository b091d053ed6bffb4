// A decision as the scripts answer it (docs/algorithms.md): allowed (0/1), limit, remaining,
// reset_after_ms, retry_after_ms (-1: never), or nothing when the numbers cannot be one. The one
// reading of those numbers, for the five-integer replies (redis_backend.cpp) and the batch's
// two or three (batch.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

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

}  // namespace floodgate::redis
