// One decision as the run recorded it for the replay (--replay): which key, what cost, the
// verdict, and the millisecond the deciding clock read — exactly, because the bench gave the
// backend that clock (see library_target.cpp).
#pragma once

#include <cstdint>

namespace floodgate::bench {

struct decision_record {
  std::int64_t time_ms = 0;  // the "now" the algorithm decided at, ms since the epoch
  std::int64_t cost = 0;
  std::uint32_t key = 0;     // index into the run's keys
  std::uint32_t allowed = 0;  // 1 admitted, 0 denied (32 bits: no padding to send)
};

}  // namespace floodgate::bench
