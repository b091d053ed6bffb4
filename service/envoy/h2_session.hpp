// gRPC's unary calls over HTTP/2, as a server, on nghttp2: fed the bytes a client sent, asked for
// the bytes to send back. No sockets, no threads, no clock (grpc_connection.cpp does the I/O),
// so it is tested on bytes. nghttp2 stays inside h2_session.cpp.
//
//   h2_session s(events, {.max_streams = 100, .max_message_bytes = 64 * 1024});
//   if (!s.receive(bytes)) ...;       // a connection error: send what is left, then close
//   s.send(out);                      // appends what to write to the socket
//   events.on_message(id, msg) -> s.answer(id, reply) or s.fail(id, status, "why")
//
// A call is a stream: its headers (on_call: the method's path and grpc-timeout), one
// length-prefixed message (on_message, once whole), and an answer: a message and grpc-status 0
// in trailers, or a trailers-only error. A stream the client has not finished when the answer
// goes out is reset (NO_ERROR), so it holds no slot of max_streams. Refused here without
// asking anyone: a message over max_message_bytes (RESOURCE_EXHAUSTED, as soon as its prefix
// says so), a grpc-encoding other than identity (UNIMPLEMENTED at the headers, as upstream's
// grpc-go answers), a compressed flag without one (INTERNAL), a stream ended without a message
// (CANCELLED), headers over max_header_bytes (the stream is reset). on_closed comes once per
// stream that on_call saw, whoever ended it.
// Threading: not thread-safe; events run on the caller's stack, inside receive() or send().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct nghttp2_session;  // nghttp2.h

namespace floodgate::service::envoy {

// gRPC status codes this server answers with.
enum class grpc_status : int {
  ok = 0,
  cancelled = 1,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  resource_exhausted = 8,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
};

struct h2_limits {
  std::uint32_t max_streams = 100;            // SETTINGS_MAX_CONCURRENT_STREAMS
  std::size_t max_message_bytes = 64 * 1024;  // a request message's, prefix excluded
  std::size_t max_header_bytes = 16 * 1024;   // a stream's header names and values in all
};

class h2_session {
 public:
  class events {
   public:
    virtual ~events() = default;
    // A call's headers arrived: `path` is its method; `timeout` its grpc-timeout, if any.
    virtual void on_call(std::int32_t stream, std::string_view path,
                         std::optional<std::chrono::nanoseconds> timeout) = 0;
    // Its message, whole (valid during the call only).
    virtual void on_message(std::int32_t stream, std::string_view message) = 0;
    // The stream is over: answered and sent, reset by the client, or the connection ended.
    virtual void on_closed(std::int32_t stream) = 0;
  };

  h2_session(events& e, h2_limits limits);
  ~h2_session();
  h2_session(const h2_session&) = delete;
  h2_session& operator=(const h2_session&) = delete;

  // Feeds bytes from the client. False: the connection is broken (a protocol error, a flood);
  // send() still gives the GOAWAY to write before closing.
  bool receive(const std::uint8_t* data, std::size_t size);
  // Appends up to about `max` bytes to write, if any.
  void send(std::string& out, std::size_t max);
  // False once nothing more will be read nor written: close the connection.
  bool alive() const;
  // Whether the client's connection preface and first SETTINGS have arrived.
  bool established() const noexcept { return established_; }
  // Streams open (answered ones count until sent).
  std::size_t open_streams() const noexcept { return streams_.size(); }
  // Answers whose message is not all sent: after a send() that stopped short of its `max`, the
  // client's flow-control window holds them back (a client that never opens it holds them, and
  // their streams, for good: grpc_connection.cpp bounds that).
  std::size_t unsent_answers() const noexcept { return unsent_; }
  // The oldest of them, by its place among all answers (to tell whether it has moved on).
  std::optional<std::uint64_t> oldest_unsent() const;

  // Answers a call whose message arrived: `message` with grpc-status 0. Ignored for a stream
  // that is gone or answered.
  void answer(std::int32_t stream, std::string_view message);
  // Ends a call with an error status and message (trailers only).
  void fail(std::int32_t stream, grpc_status status, std::string_view message);
  // GOAWAY: no new call from now on; those open finish.
  void go_away();

  struct stream_state;  // h2_session.cpp
  struct callbacks;     // h2_session.cpp: nghttp2's callbacks, friends of this class
  class block_pool;     // h2_session.cpp: nghttp2's memory for this session

 private:
  events& events_;
  h2_limits limits_;
  std::unique_ptr<block_pool> blocks_;  // outlives session_ (deleted in ~h2_session)
  ::nghttp2_session* session_ = nullptr;
  bool established_ = false;
  std::uint64_t answers_ = 0;  // answers with a message so far: the next one's place
  std::size_t unsent_ = 0;     // of them, those not all sent yet
  using stream_map = std::unordered_map<std::int32_t, std::unique_ptr<stream_state>>;
  stream_map streams_;  // nghttp2's stream user data points here
  std::vector<stream_map::node_type> spare_;  // of streams that ended, for new ones
  stream_state* receiving_ = nullptr;         // whose headers came last (null: ended)
};

}  // namespace floodgate::service::envoy
