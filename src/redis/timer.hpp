// A steady timer whose handler runs only for the wait armed last: arming again or cancelling
// makes an earlier expiry stale even when Asio has already queued its handler (a cancel cannot
// take that back), so each wait carries a generation and a stale one does nothing. One for the
// reconnect backoff and the earliest deadline of a connection, the waiting room's wake, and the
// Cluster's and Sentinel's refreshes and questions.
//
//   timer t{io};
//   t.after(backoff.next(), [this] { connect(); });
//   t.at_earliest(call.deadline, [this] { on_deadline(); });  // kept if armed sooner
//   t.cancel();                                                // nothing runs
//
// Io thread only. The owner outlives its io_context's run, or cancels first: a handler of a
// destroyed timer returns without touching it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <utility>

namespace floodgate::redis {

class timer {
 public:
  using clock = std::chrono::steady_clock;

  explicit timer(boost::asio::io_context& io) : timer_(io) {}
  timer(const timer&) = delete;  // waits name it by address
  timer& operator=(const timer&) = delete;

  // `f()` at `t`, instead of anything armed before.
  template <class F>
  void at(clock::time_point t, F f) {
    armed_for_ = t;
    const auto generation = ++generation_;
    timer_.expires_at(t);
    timer_.async_wait(
        [this, generation, f = std::move(f)](const boost::system::error_code& ec) mutable {
          if (ec || generation != generation_) return;
          armed_for_ = not_armed;  // f may arm it again
          f();
        });
  }
  template <class F>
  void after(clock::duration d, F f) {
    at(clock::now() + d, std::move(f));
  }
  // at(t, f) unless armed for t or sooner already: one wake for the earliest of many times.
  template <class F>
  void at_earliest(clock::time_point t, F f) {
    if (t < armed_for_) at(t, std::move(f));
  }

  void cancel() {
    armed_for_ = not_armed;
    ++generation_;
    timer_.cancel();
  }
  bool armed() const noexcept { return armed_for_ != not_armed; }

 private:
  boost::asio::steady_timer timer_;
  static constexpr clock::time_point not_armed = clock::time_point::max();
  std::uint64_t generation_ = 0;
  clock::time_point armed_for_ = not_armed;
};

}  // namespace floodgate::redis
