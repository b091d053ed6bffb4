// penalty: a key refused by its window stays refused for the policy's block_for
// (docs/algorithms.md, "Penalties"). Pure, like the algorithms' step functions: it takes the
// window's decision and the block in force, and says what the request gets.
#pragma once

#include <cstdint>

#include "core/params.hpp"

namespace floodgate::core {

// The ms left of a block stored as its end `until` (absent: left 0), at most block_for: a
// block is never longer than the policy now says. When `until` is further than block_for
// away (a reload shortened block_for, or the clock stepped back) the caller stores
// now + block_for as the end, so the block ends when retry_after says.
constexpr std::int64_t block_left(std::int64_t until, std::int64_t now,
                                  std::int64_t block_for) noexcept {
  const std::int64_t left = until - now;
  return left < 0 ? 0 : (left > block_for ? block_for : left);
}

struct penalty_result {
  decision d;           // what the request gets
  bool commit = false;  // write the window's state (allowed, cost > 0, no block in force)
  bool starts = false;  // a block of block_for starts now: store its end, now + block_for
};

// `window` is the algorithm's decision for this request; `left` the block in force (0: none).
penalty_result penalize(const decision& window, std::int64_t cost, std::int64_t left,
                        std::int64_t block_for) noexcept;

}  // namespace floodgate::core
