// At most one log line per interval for an event that can happen thousands of times a second
// (backend errors, connection caps), without losing the count: events in between are counted,
// and the count is reported either with the next line or — when the incident ends and no next
// event comes — by a flush one interval after the last line, so it is never held longer.
//
//   log_throttle<std::error_code> t(1s);
//   auto d = t.on_event(now, ec);
//   if (d.log) log(ec, d.suppressed);                 // "error=... more_since_last_line=N"
//   if (d.flush_at) arm_timer(*d.flush_at);           // then, when it fires:
//   if (auto s = t.on_flush(now)) log_summary(s->count, s->last);
//
// Pure (time is passed in), so it is tested without sleeping; thread-safe (one mutex, held for
// a few instructions).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

namespace floodgate::service {

template <class Detail>
class log_throttle {
 public:
  using clock = std::chrono::steady_clock;

  explicit log_throttle(clock::duration interval) : interval_(interval) {}

  struct decision {
    bool log = false;                           // write a line for this event now
    std::uint64_t suppressed = 0;               // events not logged since the previous line
    std::optional<clock::time_point> flush_at;  // arm a timer for on_flush at this time
  };

  decision on_event(clock::time_point now, const Detail& detail) {
    std::lock_guard lock(mutex_);
    decision d;
    if (!last_line_ || now - *last_line_ >= interval_) {
      d.log = true;
      d.suppressed = suppressed_;
      suppressed_ = 0;
      last_line_ = now;
      return d;
    }
    ++suppressed_;
    last_suppressed_ = detail;
    if (!flush_armed_) {
      flush_armed_ = true;
      d.flush_at = *last_line_ + interval_;
    }
    return d;
  }

  struct summary {
    std::uint64_t count = 0;  // events not logged since the last line
    Detail last;              // the latest of them
  };

  // The flush timer fired (or the process is stopping): what to report, if anything. A
  // summary counts as a line, so a continuing incident still gets one line per interval.
  std::optional<summary> on_flush(clock::time_point now) {
    std::lock_guard lock(mutex_);
    flush_armed_ = false;
    if (suppressed_ == 0) return std::nullopt;
    summary s{suppressed_, last_suppressed_};
    suppressed_ = 0;
    last_line_ = now;
    return s;
  }

 private:
  const clock::duration interval_;
  std::mutex mutex_;
  std::optional<clock::time_point> last_line_;
  std::uint64_t suppressed_ = 0;
  Detail last_suppressed_{};
  bool flush_armed_ = false;
};

}  // namespace floodgate::service
