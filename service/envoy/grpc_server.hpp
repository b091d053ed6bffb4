// The gRPC server of Envoy's rate limit service API: envoy.service.ratelimit.v3.
// RateLimitService/ShouldRateLimit and grpc.health.v1.Health, on gRPC's callback API and
// its own threads. gRPC stays inside grpc_server.cpp: this header does not include it.
//
//   grpc_server g({.address = "127.0.0.1:8081"}, rls, metrics);  // throws if it cannot bind
//   ... g.port() ...
//   g.begin_drain();  // health NOT_SERVING (SIGTERM): new calls go elsewhere
//   g.shutdown(5s);   // refuse new calls, finish those in flight
//
// Connections are accepted by floodgated (grpc_acceptor: caps, no give-up on EMFILE) and handed
// to gRPC, through a TLS relay when TLS is on (tls_relay.hpp); every call is ours from its headers
// (one generic service) and counted until its message arrives (stream_guard: caps and a deadline).
// Threading: calls arrive on gRPC's threads and are answered from the limiter's handler; one thread
// ends the calls whose message is late.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "connection_table.hpp"
#include "stream_guard.hpp"
#include "tls_relay.hpp"

namespace floodgate::service::envoy {

class rls_service;
class rls_metrics;

struct grpc_options {
  std::string address = "127.0.0.1:8081";     // HOST:PORT; port 0 picks a free one
  std::size_t max_message_bytes = 64 * 1024;  // a larger request is refused by gRPC
  // Calls in flight on one connection at most (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a
  // client waits for a slot beyond it (Envoy opens another connection).
  int max_streams_per_connection = 100;
  // Memory gRPC may use for connections and calls; beyond it new work is refused. A backstop:
  // the caps below are what bound a hostile client's share.
  std::size_t memory_quota_bytes = 256u << 20;
  // Calls whose message has not arrived: at most so many in all and per address, each at most
  // message_timeout. A call over a cap is refused at once (RESOURCE_EXHAUSTED).
  stream_caps streams;
  // Open connections at most, in all and from one client address: a new one over either is
  // closed at once (grpc_acceptor.hpp).
  connection_caps caps;
  // TLS (mutual with a CA file) on every connection; none: plaintext (tls_relay.hpp).
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
