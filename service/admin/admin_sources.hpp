// What the admin listener's answers are made of (admin.hpp routes, status.hpp renders
// /v1/status, inspector.hpp runs key requests): what they read — the counters, the backend's
// health, hot keys, the rules in force and Redis's clocks — and the JSON response they all
// give. Its own header so that the routing and the status page both depend on it, not on each
// other.
//
//   admin_sources s{&stats, [&] { return backend_state{b.healthy(), std::string(b.kind())}; }};
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http_message.hpp"
#include "api/render.hpp"
#include "config/config_store.hpp"
#include "redis_watch/clock_skew.hpp"
#include "rules/rules_state.hpp"
#include "telemetry/metrics.hpp"

namespace floodgate::service {

class hot_keys;

struct backend_state {
  bool healthy = false;
  std::string kind;
  std::string last_error = {};  // why it fails, in the server's words; empty when it answers
};

struct admin_sources {
  metrics* stats = nullptr;                // never null
  std::function<backend_state()> backend;  // for /readyz and /v1/status
  const hot_keys* top = nullptr;           // null: hot keys are off
  const config_store* store = nullptr;     // the rules; needed by /v1/top, /v1/status, keys
  // Redis's clock against this host's, per sampled node (/v1/status); empty: not sampled.
  std::function<std::vector<node_clock>()> clocks = {};
  // Where the rules come from and which version runs (/v1/status); empty: a file, no version.
  std::function<rules_state()> rules_source = {};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool keys = false;                // /v1/inspect and /v1/reset are served (a runner exists)
  std::size_t max_key_size = 1024;  // bytes of a decoded key, as on the public listener
  // Host names the admin listener answers to besides IP literals and localhost (--admin-host).
  std::vector<std::string> host_names = {};
};

// Every admin answer carries callers' keys and is read by a browser (/ui): never cached, and
// never sniffed into HTML or script (nosniff: a key may be markup).
inline void lock_down(http_response& res) {
  for (const auto& [name, value] : res.headers)
    if (name == "X-Content-Type-Options") return;
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
}

// A 200 with serialized JSON `body`, as every admin answer is: never cached (callers' keys).
inline http_response admin_json(std::string body) {
  http_response res;
  res.headers.emplace_back("Content-Type", "application/json");
  res.headers.emplace_back("Cache-Control", "no-store");  // callers' keys
  lock_down(res);
  res.body = std::move(body);
  res.body += '\n';
  return res;
}

// {"error": message}, locked down as every admin answer.
inline http_response admin_error(int status, std::string_view message) {
  auto res = error_response(status, message);
  lock_down(res);
  return res;
}

}  // namespace floodgate::service
