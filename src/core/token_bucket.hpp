// token_bucket: up to `burst` tokens, refilled at `limit` per `window` (docs/algorithms.md).
// The level is kept in units of 1/window token so refill is exact integer arithmetic.
// Same three functions as fixed_window.hpp.
#pragma once

#include <cstdint>

#include "core/params.hpp"

namespace floodgate::core {

struct token_bucket_state {
  bool present = false;     // absent: a full bucket
  std::int64_t level = 0;   // units of 1/W token; capacity B*W
  std::int64_t updated = 0;  // ms
};

decision decide(const token_bucket_state& s, std::int64_t now, const params& p,
                std::int64_t cost);
void commit(token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t expiry(const token_bucket_state& s, std::int64_t now, const params& p);

}  // namespace floodgate::core
