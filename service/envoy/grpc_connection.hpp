// One gRPC connection of floodgated's Envoy port: a socket (TCP, or TLS over it) on one I/O
// thread, HTTP/2 through h2_session, and the calls on it answered from rls_service. What every
// connection of a server shares is grpc_shared (its caps, the stream guard, the live set).
//
//   start_grpc_connection(io, fd, "10.0.0.7", tls_or_null, shared);  // from the accept loop
//
// A call is counted by the stream guard from its headers to its message (stream_guard.hpp); its
// decision goes to the backend, and the answer comes back to the connection's thread (at once
// on the memory backend: no thread hop). A connection must finish its TLS handshake and HTTP/2
// preface within handshake_timeout, and a write within write_timeout, else it is closed.
// Threading: a connection lives on the thread of its io_context (one thread each); go_away(),
// close() and end_waiting() may be called from any thread (they post).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grpc_tls.hpp"
#include "h2_session.hpp"
#include "stream_guard.hpp"

namespace boost::asio {
class io_context;
namespace ssl {
class context;
}
}  // namespace boost::asio

namespace floodgate::service::envoy {

class rls_service;
class rls_metrics;

class grpc_connection {
 public:
  virtual ~grpc_connection() = default;
  // GOAWAY: no new call; the connection closes once those open are answered.
  virtual void go_away() = 0;
  virtual void close() = 0;
  // Ends a call the stream guard gave back (late, or evicted), if it is still open.
  virtual void end_waiting(std::int32_t stream, grpc_status status, const char* message) = 0;
};

// What the stream guard holds for a call waiting for its message: whoever takes it out of the
// guard deletes it (stream_guard.hpp: who ends the call).
struct waiting_call {
  std::weak_ptr<grpc_connection> connection;
  std::int32_t stream = 0;
};

struct grpc_shared {
  grpc_shared(rls_service& s, rls_metrics& m, stream_caps caps)
      : service(s), metrics(m), guard(caps) {}
  rls_service& service;
  rls_metrics& metrics;
  stream_guard guard;
  std::atomic<bool> serving{true};  // health SERVING (and the backend ready)
  // Decisions asked of the backend and not answered yet: their handlers hold a connection
  // (its io_context, this struct), so the server outlives them (grpc_server::shutdown).
  std::atomic<std::size_t> deciding{0};
  h2_limits limits;
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds write_timeout{10000};
  tls_failure_log* tls_failures = nullptr;  // set with TLS on

  // The connections open, for the drain; none is added once stopping is set.
  std::mutex live_mutex;
  std::unordered_map<grpc_connection*, std::weak_ptr<grpc_connection>> live;
  bool stopping = false;  // under live_mutex
};

// Serves the accepted connection `fd` (owned from now on) on `io`; over TLS when `tls` is set.
void start_grpc_connection(boost::asio::io_context& io, int fd, std::string peer,
                           boost::asio::ssl::context* tls, grpc_shared& shared);

}  // namespace floodgate::service::envoy
