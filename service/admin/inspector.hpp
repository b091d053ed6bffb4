// Runs the admin listener's key requests (GET /v1/inspect, POST /v1/reset: admin.hpp) off the
// I/O threads: a peek through the running limiter (cost 0: nothing consumed, not counted in
// /metrics or hot keys) and the raw state read from Redis (floodgate/inspect.hpp), or a reset.
//
//   inspector keys(limiter, "redis://127.0.0.1:6379");
//   keys.submit(std::move(request), [](http_response res) { /* any thread */ });
//   keys.cancel(); // at SIGTERM's drain: answers what waits with a 503, cuts the raw read short
//   keys.stop();   // before the server's executors go: cancel(), then joins the worker
//
// One worker thread and at most `max_waiting` requests queued: beyond it a 503 at once, so a
// person (or a script) hammering the endpoint can neither pile up threads nor work. Each
// request takes at most the backend's timeout for the peek plus `raw_timeout` per question of
// the raw read (floodgate/inspect.hpp: connect and answer each within it; TYPE, the value,
// ZCARD, PTTL on the key's node; for Cluster each command on at most seeds + 5 nodes, for
// Sentinel one question per sentinel before). A drain does not wait for them: cancel() ends
// the raw read in progress at once (its answer says so), so shutdown waits at most for the
// running request's peek (the backend's timeout).
//
// A key is inspected and reset under the rule that decides it in a check: a run-time override
// in force (floodgate override set, when `live` is given), else the rule's own `overrides:`,
// else the rule; its state is that policy's (docs/algorithms.md, "State and policy changes").
//
// The answer of an inspect:
//   {"rule", "algorithm", "limit", "window_ms", "capacity", "shadow", "key",   (the policy
//                                 that decides the key: an override's when one applies)
//    "override": {"source": "runtime"|"rules", "match", "kind": "exact"|"prefix",
//                 "expires_at_ms", "expires_in_ms" (runtime only)} | null,
//    "remaining", "reset_after_ms", "local", "local_mode",   (the peek; local: decided in
//                                 this process; local_mode: so because the backend is down)
//    "backend", "raw": {"node", "redis_key", "type", "value", "members", "ttl_ms"} | null,
//    "raw_note": why raw is null or failed (absent when it was read)}
// of a reset: {"rule", "key", "override", "reset": true}. A backend error: 503 {"error"}.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "admin/admin.hpp"
#include "config/runtime_overrides.hpp"
#include "floodgate/inspect.hpp"
#include "floodgate/limiter.hpp"

namespace floodgate::service {

class inspector {
 public:
  using done_fn = std::function<void(http_response)>;

  // `live`: the run-time overrides in force (null: none); it must outlive this.
  inspector(std::shared_ptr<limiter> l, std::string url, const runtime_overrides* live = nullptr,
            std::size_t max_waiting = 8,
            std::chrono::milliseconds raw_timeout = std::chrono::seconds(1));
  ~inspector();  // stop()
  inspector(const inspector&) = delete;
  inspector& operator=(const inspector&) = delete;

  // Runs `r` on the worker; `done` is called once, on the worker (or here, when refused).
  void submit(key_request r, done_fn done);
  // Any thread, returns at once: answers the waiting requests and every later one with a 503,
  // and cuts the running one's raw read short (redis_inspector::stop).
  void cancel();
  // cancel(), then joins the worker (the running request answered).
  void stop();

 private:
  // One request, on the worker.
  http_response run(const key_request& r);

  std::shared_ptr<limiter> limiter_;
  std::string url_;
  const runtime_overrides* live_;
  std::size_t max_waiting_;
  std::chrono::milliseconds raw_timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<key_request, done_fn>> queue_;  // under mutex_
  bool stopping_ = false;                              // under mutex_
  redis_inspector* reading_ = nullptr;                 // the raw read in progress, under mutex_
  std::thread worker_;
};

}  // namespace floodgate::service
