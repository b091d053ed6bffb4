// The HTTP server: Beast over Asio on a few threads, keep-alive, a deadline on every read and
// caps on everything a client controls. Requests go through the pure handler (api/route.hpp,
// api/render.hpp); decisions come from limiter::async_check_all.
//
//   server s(options, limiter, store, stats, [&] { reload(); });   // callback runs on SIGHUP
//   return s.run();   // binds (throws std::runtime_error if it cannot), serves until
//                     // SIGTERM/SIGINT, drains in-flight requests, returns 0
//
// Threading: run() blocks and runs the I/O on `threads` threads, the caller's included. Each
// connection lives on its own strand; limiter handlers (which may run on a backend thread) are
// posted back to it. The SIGHUP callback runs on an I/O thread, the one that accepts
// connections: it must return at once (floodgated's hands the reload to a background thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/route.hpp"
#include "config/config_store.hpp"
#include "floodgate/limiter.hpp"
#include "telemetry/metrics.hpp"

namespace floodgate::service {

class hot_keys;
class runtime_overrides;
using namespace std::chrono_literals;

struct server_options {
  std::string host = "127.0.0.1";  // an IP address or a name that resolves to one
  std::uint16_t port = 8080;       // 0: any free port (the "listening" log line says which)
  std::size_t threads = 0;         // I/O threads; 0: the hardware's, clamped to 2..8
  // Open connections, in all and from one peer address. A new connection beyond either cap
  // closes the longest-idle keep-alive connection (of that peer, or of all) to make room; when
  // none is idle it gets a 503 and is closed. (main keeps max_connections below the
  // file-descriptor limit.)
  std::size_t max_connections = 4096;
  std::size_t max_connections_per_peer = 1024;
  std::size_t max_header_bytes = 16 * 1024;  // request line + headers; beyond it a 431
  std::size_t max_body_bytes = 64 * 1024;    // beyond it a 413
  // A new connection must deliver a request's headers within this, and a kept-alive one
  // within this of the request's first byte; else the connection is closed.
  std::chrono::milliseconds header_timeout = 5s;
  std::chrono::milliseconds body_timeout = 5s;   // headers read → body complete
  std::chrono::milliseconds idle_timeout = 60s;  // keep-alive: waiting for the next request
  std::chrono::milliseconds write_timeout = 5s;  // one response, to the client's socket
  // SIGTERM: stop accepting, close idle connections, let requests already read finish; after
  // this, close what is left.
  std::chrono::milliseconds drain_timeout = 10s;
  // Called once when the drain starts, on an I/O thread (must return at once): work that
  // requests wait on elsewhere (the admin listener's key inspector) cuts itself short, so that
  // the drain does not wait for it.
  std::function<void()> on_drain;
  request_limits limits;
  // The admin listener (--admin-listen, admin.hpp): its own address, where every request goes
  // to admin_handler and none to the check endpoints. Off while admin_handler is empty. The
  // handler answers by calling its second argument once, on any thread (at once, or later
  // from a worker: the connection waits, under the same drain as a check).
  std::string admin_host = "127.0.0.1";
  std::uint16_t admin_port = 0;  // 0: any free port (the "admin listening" log line says which)
  std::function<void(const http_request&, std::function<void(http_response)>)> admin_handler;
  hot_keys* top = nullptr;  // fed every decided check's keys (--top-keys); null: off
  // Run-time overrides (--rules-from): each request is routed with the snapshot in force.
  const runtime_overrides* live = nullptr;
};

class server {
 public:
  server(server_options options, std::shared_ptr<limiter> limiter, config_store& store,
         metrics& stats, std::function<void()> on_reload);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  int run();

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service
