// One admitted request as the run saw it: which key, what cost, and the interval in which the
// deciding clock (Redis's TIME, or the memory backend's) must have read "now" — from just before
// the request was sent to just after its answer arrived, in whole ms as the algorithms count.
#pragma once

#include <cstdint>

namespace floodgate::bench {

struct admission {
  std::int64_t earliest_ms = 0;  // floor((send time - tolerance) / 1 ms)
  std::int64_t latest_ms = 0;    // floor((receive time + tolerance) / 1 ms)
  std::int64_t cost = 0;
  std::uint32_t key = 0;       // index into the run's keys
  std::uint32_t reserved = 0;  // keeps the record 32 bytes with no padding to send
};

}  // namespace floodgate::bench
