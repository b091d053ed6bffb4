// Calls the node pool (node_pool.hpp, its one room) holds back rather than sends: until a time
// (a Cluster's TRYAGAIN backoff, a redirection sent on the next turn) or until the topology
// changes (a Sentinel call waiting for the new primary). One timer, at the earliest moment one of
// them is due or at its deadline; each is handed back to its owner then, and whatever is left can
// be taken at once (a new primary, teardown). Header-only: used by the Asio-based clients alone, so
// it adds no Asio TU.
//
//   waiting_room room{io, [&](std::vector<request_ptr>& due) { route(due); },
//                         [&](std::vector<request_ptr>& late) { fail(late, timeout); }};
//   room.hold(std::move(call), steady::now() + 5ms);
//   room.hold(std::move(call), waiting_room::until_taken);
//   for (auto& r : room.take_all()) resend(std::move(r));
//
// Io thread only. A call's deadline is request::deadline; a call due and past its deadline at
// the same wake goes to `expired`.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <utility>
#include <vector>

#include "redis/request.hpp"
#include "redis/timer.hpp"

namespace floodgate::redis {

class waiting_room {
 public:
  using clock = request::clock;
  // Given the calls due (or past their deadline) at one wake, in the order they were held.
  using handler = std::function<void(std::vector<request_ptr>&)>;
  static constexpr clock::time_point until_taken = clock::time_point::max();

  waiting_room(boost::asio::io_context& io, handler due, handler expired)
      : timer_(io), due_(std::move(due)), expired_(std::move(expired)) {}
  waiting_room(const waiting_room&) = delete;
  waiting_room& operator=(const waiting_room&) = delete;

  // Holds `r` until `until` (until_taken: until take_all()), or its deadline, if sooner.
  void hold(request_ptr r, clock::time_point until) {
    const auto wake = std::min(until, r->deadline);
    held_.push_back({std::move(r), until});
    arm(wake);
  }

  // Everything held, oldest first; the room is empty after it.
  std::vector<request_ptr> take_all() {
    std::vector<request_ptr> out;
    out.reserve(held_.size());
    for (auto& h : held_) out.push_back(std::move(h.call));
    held_.clear();
    return out;
  }

  // Stops the timer for good (teardown: take_all() the calls).
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }

  // f(request&) for each call held.
  template <class F>
  void for_each(F&& f) {
    for (auto& h : held_) f(*h.call);
  }

 private:
  struct held_call {
    request_ptr call;
    clock::time_point until;
  };

  void arm(clock::time_point wake) {
    if (!stopped_) timer_.at_earliest(wake, [this] { wake_up(); });
  }

  void wake_up() {
    const auto now = clock::now();
    std::vector<request_ptr> due, expired;
    std::vector<held_call> keep;
    auto next = clock::time_point::max();
    for (auto& h : held_) {
      if (h.call->deadline <= now) {
        expired.push_back(std::move(h.call));
      } else if (h.until <= now) {
        due.push_back(std::move(h.call));
      } else {
        next = std::min(next, std::min(h.until, h.call->deadline));
        keep.push_back(std::move(h));
      }
    }
    held_ = std::move(keep);
    if (next != clock::time_point::max()) arm(next);
    // Handlers may hold calls again (a call due meets TRYAGAIN at once): after the re-arm.
    if (!expired.empty()) expired_(expired);
    if (!due.empty()) due_(due);
  }

  timer timer_;
  handler due_, expired_;
  std::vector<held_call> held_;
  bool stopped_ = false;
};

}  // namespace floodgate::redis
