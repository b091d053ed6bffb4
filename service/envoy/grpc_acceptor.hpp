// The gRPC port's listening socket, so that its connections are capped like the HTTP
// listener's (in all, and per client address) and running out of file descriptors is a pause,
// not the end: a connection over a cap is closed at once; an accept that fails for want of
// descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM) is retried 100 ms later, the connection waiting
// in the backlog meanwhile. (gRPC 1.51's own acceptor, used before, gave up on EMFILE for
// good.) Admitted connections are handed over by a callback (grpc_server.cpp: to an I/O
// thread), which owns and closes them from then on.
//
//   grpc_acceptor a("127.0.0.1:8081", {.max_connections = 1024, .max_per_peer = 256},
//                   [&](int fd, auto& peer) { serve it }, [&](auto v) { count refusals });
//   a.port(); a.start(); ... a.stop();
//
// Threading: the accept loop runs on a thread of its own between start() and stop(); the two
// callbacks run on it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "connection_table.hpp"

namespace floodgate::service::envoy {

class grpc_acceptor {
 public:
  using on_refused = std::function<void(connection_table::verdict)>;
  // An admitted connection's descriptor and its client's address (as the caps count it).
  using on_admitted = std::function<void(int fd, const std::string& peer)>;

  // Binds and listens on HOST:PORT (a name, an IPv4 address or a bracketed IPv6 one; port 0
  // picks a free one). Throws std::runtime_error if it cannot.
  grpc_acceptor(const std::string& address, connection_caps caps, on_admitted hand_over,
                on_refused refused);
  ~grpc_acceptor();  // stop()
  grpc_acceptor(const grpc_acceptor&) = delete;
  grpc_acceptor& operator=(const grpc_acceptor&) = delete;

  int port() const noexcept;
  void start();
  // Stops accepting and closes the listening socket; connections handed over are not touched.
  void stop();

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service::envoy
