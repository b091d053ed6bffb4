// What floodgate-bench's two gRPC clients (grpc_h2_client: one call at a time, blocking;
// grpc_h2_mux: many calls multiplexed on one connection) share: the connect, a call's request
// headers and framing, and how an answer's headers and bytes become a grpc_reply.
//
//   int fd = connect_tcp(e, timeout, error);           // -1: `error` says why
//   std::string framed = frame_message(bytes);         // the 5-byte prefix, then the message
//   on_reply_header(reply, name, value);               // each header of the answer
//   finish_reply(reply, reset_code);                   // once the stream is closed
#pragma once

#include <nghttp2/nghttp2.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "endpoint.hpp"

namespace floodgate::bench {

struct grpc_reply {
  std::string transport_error;  // the connection failed (no gRPC status); empty otherwise
  int grpc_status = -1;         // from the trailers; -1: none came
  std::string grpc_message;     // percent-decoded
  std::string message;          // the answer's message, without its 5-byte prefix
};

// A connected TCP socket (blocking, TCP_NODELAY, send and receive deadlines of `timeout`), or
// -1 with `error` set.
int connect_tcp(const endpoint& e, std::chrono::milliseconds timeout, std::string& error);

// Writes all that `session` has to send to `fd` (blocking), through `buffer` (reused). False:
// `error` says what failed.
bool send_session_output(nghttp2_session* session, int fd, std::string& buffer,
                         std::string& error);

// `message` with gRPC's length prefix (uncompressed).
std::string frame_message(std::string_view message);

// grpc-timeout's value for `timeout` (8 digits at most, in milliseconds).
std::string grpc_timeout_value(std::chrono::milliseconds timeout);

// A unary call's request headers; the views must outlive the returned array's use.
std::array<nghttp2_nv, 7> request_headers(std::string_view path, std::string_view authority,
                                          std::string_view timeout_value);

// One header (or trailer) of the answer: grpc-status and grpc-message are kept.
void on_reply_header(grpc_reply& r, std::string_view name, std::string_view value);
// Some of the answer's DATA; false: more than an answer may be (the stream is to be reset).
bool on_reply_data(grpc_reply& r, std::string_view data);
// The stream closed (`reset_code` its HTTP/2 error code): a status must have come, and with
// status 0 exactly one uncompressed message, whose prefix is taken off.
void finish_reply(grpc_reply& r, std::uint32_t reset_code);

}  // namespace floodgate::bench
