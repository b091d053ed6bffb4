// Calls a function at the first SIGTERM or SIGINT, beside floodgated's own handling of them
// (the HTTP server begins its drain then): every Asio signal_set registered for a signal is
// told of it. So gRPC health goes NOT_SERVING when the drain begins, not once HTTP's drain
// has ended and the gRPC server shuts down, and the server needs no hook for it.
//
//   drain_watch w([&] { grpc.begin_drain(); });
//
// A signal that comes after the watch exists but before the HTTP server has registered its own
// (the few milliseconds between them at start-up) no longer ends the process: Asio's handler
// is installed, and only the watch hears it. Supervisors send SIGTERM again or SIGKILL.
//
// Threading: the function runs once, on the watch's own thread; the destructor waits for it.
#pragma once

#include <functional>
#include <memory>

namespace floodgate::service::envoy {

class drain_watch {
 public:
  explicit drain_watch(std::function<void()> on_signal);
  ~drain_watch();
  drain_watch(const drain_watch&) = delete;
  drain_watch& operator=(const drain_watch&) = delete;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service::envoy
