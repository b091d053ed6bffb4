// The gRPC server of Envoy's rate limit service API: envoy.service.ratelimit.v3.
// RateLimitService/ShouldRateLimit and grpc.health.v1.Health/Check, served by floodgated itself:
// HTTP/2 (nghttp2, h2_session.hpp) on its own Asio threads, TLS with Asio's OpenSSL stream.
//
//   grpc_server g({.address = "127.0.0.1:8081"}, rls, metrics);  // throws if it cannot bind
//   ... g.port() ...
//   g.begin_drain();  // health NOT_SERVING (SIGTERM): new calls go elsewhere
//   g.shutdown(5s);   // GOAWAY, the calls in flight finished, then every connection closed
//
// Connections are accepted by grpc_acceptor (caps, no give-up on EMFILE) and served each on one
// of `threads` I/O threads (grpc_connection.hpp); every call still without its message at the
// end of the read that brought its headers is counted until it arrives (stream_guard: caps and a
// deadline), swept on the first I/O thread.
// Why not gRPC's C++ server: its threads. Each call crossed from its polling threads to its
// executor and back (server CPU per decision 2-3x HTTP's, bench/grpc_compare); here a call is read,
// decided (memory backend) and answered on one thread, as HTTP's are.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "connection_table.hpp"
#include "grpc_tls.hpp"
#include "stream_guard.hpp"

namespace floodgate::service::envoy {

class rls_service;
class rls_metrics;

struct grpc_options {
  std::string address = "127.0.0.1:8081";     // HOST:PORT; port 0 picks a free one
  std::size_t max_message_bytes = 64 * 1024;  // a larger request: RESOURCE_EXHAUSTED
  // Calls in flight on one connection at most (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a
  // client waits for a slot beyond it (Envoy opens another connection).
  int max_streams_per_connection = 100;
  std::size_t max_header_bytes = 16 * 1024;  // a call's headers; beyond: the stream is reset
  // A write to a client that does not read closes its connection after this.
  std::chrono::milliseconds write_timeout{10000};
  // I/O threads; each connection lives on one. 0: the hardware's, clamped to 2..8 (as HTTP's).
  std::size_t threads = 0;
  // Calls whose message has not arrived: at most so many in all and per address, each at most
  // message_timeout. A call over a cap is refused at once (RESOURCE_EXHAUSTED).
  stream_caps streams;
  // Open connections at most, in all and from one client address: a new one over either is
  // closed at once (grpc_acceptor.hpp).
  connection_caps caps;
  // TLS (mutual with a CA file) on every connection; none: plaintext (grpc_tls.hpp). Its
  // handshake_timeout bounds the plaintext connections' HTTP/2 preface too.
  std::optional<tls_files> tls;
};

class grpc_server {
 public:
  grpc_server(const grpc_options& options, rls_service& service, rls_metrics& metrics);
  ~grpc_server();
  grpc_server(const grpc_server&) = delete;
  grpc_server& operator=(const grpc_server&) = delete;

  int port() const noexcept;
  // Health NOT_SERVING from now on; calls are still served until shutdown().
  void begin_drain();
  // Health NOT_SERVING, no new connection, the calls in flight finished within `drain`.
  void shutdown(std::chrono::milliseconds drain);

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service::envoy
