// For tests that count admissions of a fixed window on the real clock (Redis's TIME, local
// mode's and floodgated's memory backends): the windows are aligned to the Unix epoch
// (fixed_window's start is now - now % window), so a run that straddles a boundary (xx:00 for
// an hour) counts in two windows and sees twice the limit. Seen: local mode's repeated-outage
// test counted 20 local admissions, not 10, in a fresh-clone run at 20:00 UTC.
//
//   inside_one_window(1h, 25s);   // now at least 25 s are left before the next xx:00
//
// `needed` is what the test can take at most (its own waits, summed): with it left, the test
// ends inside the window it started in. A boundary closer than that is waited out, so the
// test starts at the beginning of the next window (at most `needed` of sleep, and only in
// needed ÷ window of the runs).
#pragma once

#include <chrono>
#include <stdexcept>
#include <thread>

namespace floodgate::test {

// How long until the current epoch-aligned `window` ends, on the real clock.
inline std::chrono::milliseconds left_in_window(std::chrono::milliseconds window) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return window - now % window;
}

// Returns once at least `needed` is left in the current `window` (sleeping past its end if
// less is); what is left then.
inline std::chrono::milliseconds inside_one_window(std::chrono::milliseconds window,
                                                   std::chrono::milliseconds needed) {
  if (needed * 2 > window)
    throw std::invalid_argument("inside_one_window: the test needs more than half the window");
  auto left = left_in_window(window);
  if (left < needed) {
    // Into the next window, with a margin for the two clocks' (ours, Redis's) truncations.
    std::this_thread::sleep_for(left + std::chrono::milliseconds(50));
    left = left_in_window(window);
  }
  return left;
}

}  // namespace floodgate::test
