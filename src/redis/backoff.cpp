#include "redis/backoff.hpp"

#include <algorithm>
#include <cstdint>

namespace floodgate::redis {

backoff::backoff(std::chrono::milliseconds min, std::chrono::milliseconds max)
    : min_(min), max_(std::max(min, max)), base_(min), jitter_(std::random_device{}()) {}

std::chrono::milliseconds backoff::next() {
  const auto base = base_;
  base_ = std::min(base_ * 2, max_);
  std::uniform_int_distribution<std::int64_t> spread(base.count() / 2,
                                                     base.count() + base.count() / 2);
  return std::chrono::milliseconds(std::max<std::int64_t>(1, spread(jitter_)));
}

}  // namespace floodgate::redis
