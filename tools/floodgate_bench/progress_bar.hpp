// A one-line progress bar redrawn in place, for a person watching a terminal. Only drawn when
// stdout is a terminal (and never with --json), so piped output stays clean.
#pragma once

#include <cstdint>

namespace floodgate::bench {

class progress_bar {
 public:
  explicit progress_bar(bool enabled);
  ~progress_bar() { clear(); }

  // At most ~10 redraws a second, whatever the call rate.
  void update(double fraction, std::uint64_t decisions);
  // Erases the bar so the summary starts on a clean line.
  void clear();

 private:
  bool enabled_;
  bool drawn_ = false;
  std::int64_t last_draw_us_ = 0;
  std::int64_t started_us_ = 0;
};

}  // namespace floodgate::bench
