// One state type for every algorithm, and dispatch from a policy to its step functions.
// This is what the memory backend stores; each algorithm lives in its own file.
#pragma once

#include <cstdint>
#include <variant>

#include "core/fixed_window.hpp"
#include "core/gcra.hpp"
#include "core/sliding_log.hpp"
#include "core/sliding_window.hpp"
#include "core/token_bucket.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::core {

using any_state = std::variant<sliding_log_state, sliding_window_state, fixed_window_state,
                               token_bucket_state, gcra_state>;

// The empty state of an algorithm (what an absent or expired key means).
any_state empty_state(algorithm a);

decision decide(const any_state& s, std::int64_t now, const params& p, std::int64_t cost);
void commit(any_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t expiry(const any_state& s, std::int64_t now, const params& p);

}  // namespace floodgate::core
