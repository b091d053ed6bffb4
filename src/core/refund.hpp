// refund: gives back what an admitted request consumed when its work did not happen
// (docs/algorithms.md, "Refunds"). Never creates capacity beyond the policy's: a refund
// takes back at most what the state holds now. Pure, like the step functions; afterwards
// the state's expiry is core::expiry() again (0 or less: the state is empty).
#pragma once

#include <cstdint>

#include "core/step.hpp"

namespace floodgate::core {

void refund(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost);
void refund(sliding_window_state& s, std::int64_t now, const params& p, std::int64_t cost);
void refund(fixed_window_state& s, std::int64_t now, const params& p, std::int64_t cost);
void refund(token_bucket_state& s, std::int64_t now, const params& p, std::int64_t cost);
void refund(gcra_state& s, std::int64_t now, const params& p, std::int64_t cost);
void refund(any_state& s, std::int64_t now, const params& p, std::int64_t cost);

}  // namespace floodgate::core
