// refund: gives back what an admitted request consumed when its work did not happen
// (docs/algorithms.md, "Refunds"). Never creates capacity beyond the policy's: a refund
// takes back at most what the state holds now. Pure, like the step functions; afterwards
// the state's expiry is core::expiry() again (0 or less: the state is empty). Each returns the
// cost given back, 0..cost: 0 when the state held none of it (nothing consumed, or all of it
// back already); token_bucket and gcra round a part of a unit up (something came back).
#pragma once

#include <cstdint>

#include "core/step.hpp"

namespace floodgate::core {

std::int64_t refund(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t refund(sliding_window_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t refund(fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t refund(token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t refund(gcra_state& s, std::int64_t now, const params& p, std::int64_t cost);
std::int64_t refund(any_state& s, std::int64_t now, const params& p, std::int64_t cost);

}  // namespace floodgate::core
