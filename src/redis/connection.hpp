// One connection of a node (node.hpp, which it tells what happens): pipelined writes over a
// stream (stream.hpp: connect, TLS, greeting), replies matched in order, deadlines, batching,
// NOSCRIPT reloads, reconnect with backoff.
//
// Asio-based; everything runs on the node pool's io thread: no locks. Each attempt to connect
// opens the stream anew, and nothing from a dropped socket reaches the next one (stream.hpp).
#pragma once

#include <boost/asio/io_context.hpp>
#include <deque>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/backoff.hpp"
#include "redis/request.hpp"
#include "redis/stream.hpp"
#include "redis/timer.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

// What every connection of a client shares.
struct connection_config {
  redis_endpoint endpoint;
  redis_options options;
  script_set scripts;      // what the calls run (the backend's choice: scripts.hpp)
  tls_context_result tls;  // endpoint.tls only; an error fails every connect
};

class node;

class connection final : private stream_owner {
 public:
  enum class state {
    idle,        // not started
    connecting,  // resolving, connecting or in the handshake: requests queue
    ready,       // requests are written as they come
    backoff,     // the last attempt failed; waiting to try again: takes no requests
    stopped,
  };

  connection(boost::asio::io_context& io, const connection_config& config, node& owner);
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Calls written and not yet answered, at most. Beyond it calls wait unsent, where an
  // expired one just times out; in flight it would cost the connection and everything else
  // in flight with it. Deep enough to keep Redis busy (it runs ~100k scripts/s, so 512 are a
  // few ms of work), shallow enough that a written call is answered well within a deadline
  // under overload.
  static constexpr std::size_t max_in_flight_calls = 512;
  // Replies owed, at most, counting those of calls that timed out in flight (their replies
  // are read and dropped): a stalled server does not collect an endless pipeline.
  static constexpr std::size_t max_in_flight_replies = 2 * max_in_flight_calls;
  // The encoded size of one batch call, at most (its items are redis_options::max_batch_items
  // at most).
  static constexpr std::size_t max_batch_bytes = 64 * 1024;

  // Starts connecting (again: each attempt opens the stream anew).
  void start();
  // Queues a request (state connecting or ready). Sent by the next flush().
  void enqueue(request_ptr r);
  // Starts a write of everything queued, unless one is in progress (its completion does it).
  void flush();
  // Closes the socket, cancels timers, and hands back every request it holds.
  void stop(std::vector<request_ptr>& out);

  state current_state() const noexcept { return state_; }
  // Requests held: queued, waiting to be retried, or in flight.
  std::size_t pending() const noexcept {
    return unsent_.size() + retries_.size() + in_flight_calls_;
  }

 private:
  // What a reply in flight answers.
  struct in_flight {
    enum class kind { load, call, asking, batch };

    kind what;
    request_ptr call{};                       // kind::call
    const script* loaded = nullptr;           // kind::load: SCRIPT LOAD of it; null: FUNCTION LOAD
    script_call form = script_call::evalsha;  // kind::call and kind::batch: as sent
    request::clock::time_point written{};
    std::vector<request_ptr> batch{};  // kind::batch: its items, in order
    bool ends_write = false;           // the last reply of a write of flush()

    // f(request_ptr&) for each call it still holds (a batch item that timed out is null).
    template <class F>
    void each_call(F f) {
      if (call) f(call);
      for (auto& item : batch)
        if (item) f(item);
    }
  };

  // A batch call being assembled by flush().
  struct open_batch {
    std::vector<request_ptr> items;
    std::size_t bytes = 0;
  };

  void connect_failed(const std::string& why);
  void drop(std::error_code for_in_flight);
  // Closes the socket and forgets what was loading on it.
  void close_stream();
  // Moves the calls not in flight (retries, then unsent) to `out`.
  void take_unsent(std::vector<request_ptr>& out);

  // stream_owner
  void stream_ready() override;
  void stream_reply(reply& r) override;
  void stream_read_done() override;
  void stream_written() override;
  void stream_closed(const std::string& why, std::error_code ec) override;

  void on_call_reply(request_ptr call, reply& r, script_call form);
  void on_batch_reply(std::vector<request_ptr> items, reply& r, script_call form);
  // SCRIPT LOAD of `s` before the next calls, unless one is queued or in flight already.
  void reload(const script* s);
  // `call`, which did not run, goes again with the next flush; at its deadline, timeout now.
  void retry(request_ptr call);
  script_call form_for(std::uint8_t not_run) const noexcept;
  void append_call(std::string& out, const request& r, script_call form);
  // Whether `r`, the reply to an FCALL, says the function did not run: it is missing (the
  // library was flushed: loaded again) or FCALL is denied to us. Either way this connection
  // sends EVALSHA until the library is back.
  bool function_missing(const reply& r);
  // Adds batchable `r` to an open batch it can share, or opens one (sending the oldest when
  // too many are open).
  void add_to_batch(std::string& out, std::vector<open_batch>& open, request_ptr r,
                    request::clock::time_point now);
  // Appends `r` as its own call, in the form its script's replies so far allow.
  void send_call(std::string& out, request_ptr r, request::clock::time_point now);
  // Appends `b` as one call (a lone item as its own script's call), records it in flight and
  // empties `b`.
  void send_batch(std::string& out, open_batch& b, request::clock::time_point now);

  void arm_deadline(request::clock::time_point t);
  void on_deadline();

  const connection_config& config_;
  node& owner_;

  stream_config stream_config_;  // config_ as the stream needs it
  state state_ = state::idle;
  stream stream_;

  std::vector<const script*> loads_;    // SCRIPT LOADs to send before the next calls
  std::vector<const script*> loading_;  // SCRIPT LOADs in flight
  bool functions_ = false;              // the library is loaded: calls go as FCALL
  bool load_library_ = false;           // FUNCTION LOAD to send before the next calls
  bool library_loading_ = false;        // FUNCTION LOAD in flight
  std::deque<request_ptr> retries_;     // calls to send again (after NOSCRIPT)
  std::deque<request_ptr> unsent_;      // calls not written yet
  std::deque<in_flight> in_flight_;     // written, awaiting replies, in order
  std::size_t in_flight_calls_ = 0;     // requests in in_flight_ (a batch counts its items)
  std::size_t writes_in_flight_ = 0;    // flush() writes not fully answered

  timer state_timer_;               // backoff
  timer deadline_timer_;            // the earliest request deadline
  bool deadline_deferred_ = false;  // expired calls in flight, replies waiting to be read

  request::clock::duration round_trip_{0};  // smoothed time from write to reply
  backoff backoff_;
};

}  // namespace floodgate::redis
