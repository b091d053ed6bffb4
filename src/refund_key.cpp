// Refunds' idempotency keys (docs/algorithms.md, "Refunds"): what a key may be, and how long
// a backend remembers one.
#include <algorithm>

#include "floodgate/backend.hpp"

namespace floodgate {

bool valid_idempotency_key(std::string_view k) noexcept {
  if (k.empty() || k.size() > 64) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == ':' || c == '-';
  });
}

std::chrono::milliseconds refund_key_memory(const policy& p) noexcept {
  using namespace std::chrono_literals;
  return std::clamp<std::chrono::milliseconds>(p.window(), 1min, 24h);
}

}  // namespace floodgate
