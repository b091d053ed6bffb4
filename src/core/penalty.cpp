#include "core/penalty.hpp"

#include <algorithm>

namespace floodgate::core {

penalty_result penalize(const decision& window, std::int64_t cost, std::int64_t left,
                        std::int64_t block_for) noexcept {
  penalty_result r{window, false, false};
  decision& d = r.d;
  const auto longer = [](std::chrono::milliseconds a, std::int64_t b) {
    return std::max(a, std::chrono::milliseconds{b});
  };
  if (left > 0) {
    // Refused whatever the window says; a peek still passes (it consumes nothing) but learns
    // that nothing is left. Denials during a block do not extend it.
    d.remaining = 0;
    d.reset_after = longer(d.reset_after, left);
    if (cost > 0) {
      d.allowed = false;
      if (d.retry_after != decision::never) d.retry_after = longer(d.retry_after, left);
    }
    return r;
  }
  if (!d.allowed && d.retry_after != decision::never && cost > 0) {
    // Refused by the window: the block starts. (A cost beyond the capacity starts none: it
    // is refused for what it asks, not for the key's rate.)
    r.starts = true;
    d.remaining = 0;
    d.reset_after = longer(d.reset_after, block_for);
    d.retry_after = longer(d.retry_after, block_for);
    return r;
  }
  r.commit = d.allowed && cost > 0;
  return r;
}

}  // namespace floodgate::core
