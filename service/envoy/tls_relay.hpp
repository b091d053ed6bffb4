// TLS (and mutual TLS) for the gRPC port: --grpc-tls-cert, --grpc-tls-key, --grpc-tls-ca.
// floodgated accepts gRPC connections itself (grpc_acceptor.hpp: the caps) and hands them to
// gRPC, but gRPC 1.51 serves a handed-over descriptor in plaintext only
// (grpc_server_add_channel_from_fd refuses secure credentials). So TLS ends here: each admitted
// connection's handshake runs on this relay's thread, and once it has succeeded the plaintext
// flows to gRPC over a socketpair whose other end gRPC is handed. The caps keep counting the
// client's TCP connection, which lives as long as its relay; either side closing closes both.
//
//   tls_relay r({.cert_file = "tls.crt", .key_file = "tls.key", .ca_file = "ca.crt"},
//               [&](int plain_fd, const std::string& peer) { hand to gRPC });  // throws
//   r.adopt(fd, peer);  // an admitted connection, from the accept loop
//   r.stop();           // after gRPC's shutdown: closes what is left
//
// Bounds: a handshake must finish within handshake_timeout (else the connection is closed);
// a connection holds two 16 KiB buffers, one chunk in flight each way, so a side that does not
// read stops the other side's reads (no unbounded queue). Failed handshakes (a plaintext
// client, a client without a certificate the CA signed) are logged at most once a second, with
// a count. Threading: one thread of its own runs every handshake and relay; adopt() may be
// called from any thread; `hand_over` runs on the relay's thread. Certificates are read once,
// at construction (a restart picks up new ones).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace floodgate::service::envoy {

struct tls_files {
  std::string cert_file;  // --grpc-tls-cert: the server's PEM certificate chain
  std::string key_file;   // --grpc-tls-key: its PEM private key
  std::string ca_file;    // --grpc-tls-ca: PEM CAs a client's certificate must chain to
                          // (mutual TLS: a client without one is refused); empty: none asked
  std::chrono::milliseconds handshake_timeout{5000};
};

class tls_relay {
 public:
  // A TLS connection's plaintext end for gRPC (it owns and closes it), and the client's address.
  using on_plain = std::function<void(int fd, const std::string& peer)>;

  // Reads the files; throws floodgate::config_error naming the flag, the file and the problem
  // (missing, unreadable, not PEM, a key that is not the certificate's).
  tls_relay(const tls_files& files, on_plain hand_over);
  ~tls_relay();  // stop()
  tls_relay(const tls_relay&) = delete;
  tls_relay& operator=(const tls_relay&) = delete;

  // Takes an accepted TCP connection (owns and closes `fd` from now on) and starts its handshake.
  void adopt(int fd, std::string peer);
  // Closes every connection, finished or not, and joins the thread. Idempotent.
  void stop();

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service::envoy
