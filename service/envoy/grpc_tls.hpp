// TLS (and mutual TLS) for the gRPC port: --grpc-tls-cert, --grpc-tls-key, --grpc-tls-ca. The
// context every TLS connection's handshake uses (grpc_connection.cpp), ALPN h2 only (gRPC needs
// HTTP/2; grpc-js and Envoy offer it). Certificates are read once, at start-up (a restart picks
// up new ones). Handshake failures (a plaintext client, a client without a certificate the CA
// signed, one that never starts) are logged at most once a second, with a count.
//
//   auto ctx = make_grpc_tls_context({.cert_file = "tls.crt", .key_file = "tls.key"});  // throws
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "logging/log_throttle.hpp"

namespace boost::asio::ssl {
class context;
}

namespace floodgate::service::envoy {

struct tls_files {
  std::string cert_file;  // --grpc-tls-cert: the server's PEM certificate chain
  std::string key_file;   // --grpc-tls-key: its PEM private key
  std::string ca_file;    // --grpc-tls-ca: PEM CAs a client's certificate must chain to
                          // (mutual TLS: a client without one is refused); empty: none asked
  // The handshake and the HTTP/2 preface must be done within this, else the connection closes.
  std::chrono::milliseconds handshake_timeout{5000};
};

// Reads the files; throws floodgate::config_error naming the flag, the file and the problem
// (missing, unreadable, not PEM, a key that is not the certificate's).
std::shared_ptr<boost::asio::ssl::context> make_grpc_tls_context(const tls_files& files);

// Failed handshakes, logged at most once a second with a count of those not logged.
// Threading: any thread.
class tls_failure_log {
 public:
  void note(const std::string& peer, const std::string& error);
  // Reports the failures not logged yet, once their line is due (or at once with `force`).
  // Called often (the server's sweep), cheap when nothing is due.
  void flush(bool force = false);

 private:
  struct failure {
    std::string peer;
    std::string error;
  };
  log_throttle<failure> throttle_{std::chrono::seconds(1)};
  std::atomic<std::int64_t> flush_at_ns_{0};  // 0: none due
};

}  // namespace floodgate::service::envoy
