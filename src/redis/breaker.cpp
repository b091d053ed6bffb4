#include "redis/breaker.hpp"

namespace floodgate::redis {

bool breaker::allows(clock::time_point now, bool& probe) noexcept {
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

breaker::change breaker::answered(bool probe) noexcept {
  consecutive_failures_ = 0;
  if (probe) probe_in_flight_ = false;
  if (state_ == state::closed) return change::none;
  state_ = state::closed;
  return change::closed;
}

breaker::change breaker::no_answer(bool probe, clock::time_point now) noexcept {
  // While open, calls sent before it opened may still fail: they change nothing.
  if (!probe && (state_ != state::closed || ++consecutive_failures_ < failures_))
    return change::none;
  const bool was_closed = state_ == state::closed;
  state_ = state::open;
  open_until_ = now + open_for_;
  probe_in_flight_ = false;
  return was_closed ? change::opened : change::none;
}

}  // namespace floodgate::redis
