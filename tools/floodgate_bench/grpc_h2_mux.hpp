// A gRPC client for unary calls with many in flight on one HTTP/2 connection, as Envoy's rate
// limit filter sends them (a few connections, many streams each): nghttp2's client session on
// one plaintext TCP connection, driven by an I/O thread of its own. (grpc_h2_client is the
// blocking one-call-at-a-time client.)
//
//   grpc_h2_mux m({"127.0.0.1", 8081}, std::chrono::milliseconds(1000));
//   m.call(path, bytes, [](grpc_reply r) { ... });   // from any thread, completions included
//
// Every call completes exactly once, on the I/O thread: its answer, or a transport error when
// the connection fails or no answer came within `timeout` (then every call in flight fails and
// the next call connects again). Calls beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS wait
// in nghttp2 for a stream. What the I/O thread finds ready after one read is sent in one write:
// the calls made by the completions of one read's answers go out together.
// Threading: call() from any thread; the destructor waits for the calls in flight.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "endpoint.hpp"
#include "grpc_h2_wire.hpp"

namespace floodgate::bench {

class grpc_h2_mux {
 public:
  using on_reply = std::function<void(grpc_reply)>;

  grpc_h2_mux(endpoint e, std::chrono::milliseconds timeout);
  ~grpc_h2_mux();
  grpc_h2_mux(const grpc_h2_mux&) = delete;
  grpc_h2_mux& operator=(const grpc_h2_mux&) = delete;

  // Calls `path` with one serialized request message; `done` gets the answer.
  void call(std::string_view path, std::string_view message, on_reply done);

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::bench
