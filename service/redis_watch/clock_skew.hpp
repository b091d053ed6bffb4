// How far Redis's clock is from this host's: floodgate decides on Redis's clock (TIME inside
// the scripts), so skew never changes a decision, but it does make the retry_after and
// reset_after hints wrong for clients that act on the host's clock.
//
//   const auto sent = system_clock::now();  /* TIME */  const auto received = system_clock::now();
//   clock_sample s = clock_offset(sent, redis_now, received);   // s.offset: Redis minus host
//
// The reply is assumed to leave Redis halfway through the round trip, so the offset is exact to
// within ± rtt / 2.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace floodgate::service {

struct clock_sample {
  std::chrono::microseconds offset{0};  // Redis's clock minus the host's
  std::chrono::microseconds rtt{0};     // round trip of the TIME call
};

inline clock_sample clock_offset(std::chrono::system_clock::time_point sent,
                                 std::chrono::microseconds redis_since_epoch,
                                 std::chrono::system_clock::time_point received) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  const auto sent_us = duration_cast<microseconds>(sent.time_since_epoch());
  const auto rtt = duration_cast<microseconds>(received - sent);
  return {redis_since_epoch - (sent_us + rtt / 2), rtt};
}

// A sampled node's latest clock (redis_sampler.hpp; GET /v1/status on the admin listener).
struct node_clock {
  std::string node;  // host:port
  bool up = false;   // the last sample answered
  std::optional<clock_sample> clock;
};

// Whether `s` is beyond `threshold` either way.
inline bool skewed(const clock_sample& s, std::chrono::microseconds threshold) {
  return std::chrono::abs(s.offset) > threshold;
}

}  // namespace floodgate::service
