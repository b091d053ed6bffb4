// A blocking gRPC client for unary calls, on nghttp2's client session over one plaintext TCP
// connection: the least a call can cost a client (gRPC's C++ library spent 19-33 us a call,
// more than floodgated spent answering it). One call in flight; not thread-safe.
//
//   grpc_h2_client c({"127.0.0.1", 8081}, std::chrono::milliseconds(1000));
//   auto r = c.call("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", bytes);
//   if (r.transport_error.empty() && r.grpc_status == 0) use(r.message);
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "endpoint.hpp"
#include "grpc_h2_wire.hpp"

namespace floodgate::bench {

class grpc_h2_client {
 public:
  // `timeout` bounds each call (sent as grpc-timeout, and the socket's read deadline) and the
  // connect. Connects on the first call.
  grpc_h2_client(endpoint e, std::chrono::milliseconds timeout);
  ~grpc_h2_client();
  grpc_h2_client(const grpc_h2_client&) = delete;
  grpc_h2_client& operator=(const grpc_h2_client&) = delete;

  // Calls `path` with one serialized request message. A connection the server has since
  // closed (GOAWAY, a restart) is replaced once, before anything of the call was answered.
  grpc_reply call(std::string_view path, std::string_view message);

 public:
  struct stream_state;  // (public: the session's callbacks are free functions)

 private:
  bool connect(std::string& error);
  bool attempt(std::string_view path, std::string_view message, grpc_reply& reply);
  bool flush(std::string& error);
  void disconnect();

  endpoint endpoint_;
  std::string authority_;
  std::string timeout_header_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  nghttp2_session* session_ = nullptr;
  stream_state* current_ = nullptr;  // the call in progress: the session's callbacks fill it
  std::string out_;                  // frames to send, reused
};

}  // namespace floodgate::bench
