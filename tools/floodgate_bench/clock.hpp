// The one clock of the bench: the wall clock in µs since the epoch, the same clock Redis's
// TIME reads on this host, so admission intervals and the deciding "now" are comparable, and
// the same in every worker process, so they can agree on one start instant.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace floodgate::bench {

inline std::int64_t now_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Sleeps most of the way, then yields until the instant: every thread of every process
// leaves within a few µs of it (a plain sleep wakes up to ~100 µs late, differently per thread).
inline void wait_until_us(std::int64_t instant) {
  if (const auto ahead = instant - now_us(); ahead > 2000)
    std::this_thread::sleep_for(std::chrono::microseconds(ahead - 1000));
  while (now_us() < instant) std::this_thread::yield();
}

// Sleeps until the instant, without spinning: an open-loop sender waits between every two
// requests, and spinning would take the CPU the target runs on. It wakes some tens of µs late,
// which the corrected latency counts, as a real client's lateness would be.
inline void sleep_until_us(std::int64_t instant) {
  if (const auto ahead = instant - now_us(); ahead > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(ahead));
}

}  // namespace floodgate::bench
