// What every step function reads from a policy, as plain integers (ms, cost units).
#pragma once

#include <cstdint>
#include <numeric>

#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::core {

struct params {
  std::int64_t limit;   // L
  std::int64_t window;  // W, ms
  std::int64_t burst;   // B (equals L for algorithms without a burst)

  // The policy's numbers as its state is kept in. token_bucket and gcra depend only on B and
  // the rate L/W, so their (L, W) are reduced by their gcd: a bucket's level, in units of 1/W
  // token, and a TAT, in units of 1/L ms, then have fewer digits (100 per minute: 600 units a
  // token rather than 60,000; 10^6 a second: a TAT in ms rather than in ns), and their Redis
  // state stays one 8-byte integer in far more cases (docs/algorithms.md, "Redis
  // representation"). Equal rates also keep the same units, so a reload that scales L and W
  // together reads the state as it was written. Both backends keep the state so, and its key
  // names the reduced numbers (state_unit.hpp).
  static params of(const policy& p) noexcept {
    std::int64_t l = p.limit(), w = p.window().count();
    if (p.algo() == algorithm::token_bucket || p.algo() == algorithm::gcra) {
      const std::int64_t g = std::gcd(l, w);
      l /= g;
      w /= g;
    }
    return {l, w, p.burst()};
  }
};

// floor(a / b) and ceil(a / b) for b > 0, any sign of a.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
constexpr std::int64_t window_start(std::int64_t now, std::int64_t w) noexcept {
  return now - ((now % w) + w) % w;
}
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  return (a % b != 0 && a > 0) ? q + 1 : q;
}

// retry_after < 0 means never (the cost exceeds the capacity).
inline decision make_decision(bool allowed, std::int64_t limit, std::int64_t remaining,
                              std::int64_t reset_after, std::int64_t retry_after) noexcept {
  decision d;
  d.allowed = allowed;
  d.limit = limit;
  d.remaining = remaining < 0 ? 0 : remaining;
  d.reset_after = std::chrono::milliseconds{reset_after < 0 ? 0 : reset_after};
  d.retry_after = retry_after < 0 ? decision::never : std::chrono::milliseconds{retry_after};
  return d;
}

}  // namespace floodgate::core
