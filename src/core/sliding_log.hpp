// sliding_log: the exact log of admissions, one entry per admitted cost unit
// (docs/algorithms.md). O(limit) state. Same three functions as fixed_window.hpp.
#pragma once

#include <cstdint>
#include <deque>

#include "core/params.hpp"

namespace floodgate::core {

struct sliding_log_state {
  std::deque<std::int64_t> entries;  // admission timestamps, ascending
};

decision decide(const sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost);
void commit(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t expiry(const sliding_log_state& s, std::int64_t now, const params& p);

}  // namespace floodgate::core
