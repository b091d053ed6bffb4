// A node's circuit breaker: after `failures` calls in a row got no answer (timeout or lost
// connection), calls for the node fail at once for `open_for`; then one probe goes through,
// and its answer closes the breaker (no answer opens it again). An error reply is an answer.
// Every topology's node has one (node.hpp).
//
//   bool probe = false;
//   if (!b.allows(now, probe)) return fail(errc::not_connected);
//   ... send; when it completes:
//   switch (ec == errc::timeout || ec == errc::not_connected ? b.no_answer(probe, now)
//                                                            : b.answered(probe)) { ... }
//
// Not thread-safe: its node's io thread only.
#pragma once

#include <chrono>

#include "redis/request.hpp"

namespace floodgate::redis {

class breaker {
 public:
  using clock = request::clock;
  enum class change { none, opened, closed };

  breaker(int failures, std::chrono::milliseconds open_for) noexcept
      : failures_(failures), open_for_(open_for) {}

  // Whether a call may go now; sets `probe` when it is the half-open breaker's one probe.
  bool allows(clock::time_point now, bool& probe) noexcept {
    if (state_ == state::closed) return true;
    if (state_ == state::open) {
      if (now < open_until_) return false;
      state_ = state::half_open;
      probe_in_flight_ = false;
    }
    if (probe_in_flight_) return false;
    probe_in_flight_ = true;
    probe = true;
    return true;
  }
  // The probe allowed was not sent after all (no connection took it): another may go.
  void probe_not_sent() noexcept { probe_in_flight_ = false; }
  // A call sent through it was answered.
  change answered(bool probe) noexcept {
    consecutive_failures_ = 0;
    if (probe) probe_in_flight_ = false;
    if (state_ == state::closed) return change::none;
    state_ = state::closed;
    return change::closed;
  }
  // A call sent through it got no answer. While open, calls sent before it opened may still
  // fail: they change nothing.
  change no_answer(bool probe, clock::time_point now) noexcept {
    if (!probe && (state_ != state::closed || ++consecutive_failures_ < failures_))
      return change::none;
    const bool was_closed = state_ == state::closed;
    state_ = state::open;
    open_until_ = now + open_for_;
    probe_in_flight_ = false;
    return was_closed ? change::opened : change::none;
  }

  bool closed() const noexcept { return state_ == state::closed; }

 private:
  enum class state { closed, open, half_open };

  const int failures_;
  const std::chrono::milliseconds open_for_;
  state state_ = state::closed;
  int consecutive_failures_ = 0;
  clock::time_point open_until_{};
  bool probe_in_flight_ = false;
};

}  // namespace floodgate::redis
