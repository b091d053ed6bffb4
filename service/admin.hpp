// The admin listener's endpoints (--admin-listen): what operators and their tools read, kept
// off the listener that callers reach. A pure function of the request, like the handler.
//
//   admin_sources s{&stats, [&] { return backend_state{b.healthy(), std::string(b.kind())}; }};
//   http_response res = handle_admin(req, s);
//
// Endpoints (docs/service.md, "Admin listener"):
//   GET /metrics            the same Prometheus text as the public listener's /metrics
//   GET /healthz, /readyz   as on the public listener
//   GET /v1/top?rule=NAME[&n=N]
//                           the N (default 10) keys of a rule most often checked and most often
//                           denied (hot_keys.hpp), when --top-keys enables them:
//                           {"rule", "interval_ms", "span_ms", "capacity", "checks", "denials",
//                            "checked": [{"key", "count", "error"}...], "denied": [...]}
// Anything else is a 404, and the public listener answers these admin-only paths with a 404.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "config_store.hpp"
#include "http_message.hpp"
#include "metrics.hpp"

namespace floodgate::service {

class hot_keys;

struct backend_state {
  bool healthy = false;
  std::string kind;
};

struct admin_sources {
  metrics* stats = nullptr;                // never null
  std::function<backend_state()> backend;  // for /readyz
  const hot_keys* top = nullptr;           // null: hot keys are off
  const config_store* store = nullptr;     // the rules /v1/top may name; set with top
};

http_response handle_admin(const http_request& req, const admin_sources& sources);

// The value of query parameter `name` in `target` ("/path?a=1&b=2"), undecoded; nullopt when
// absent.
std::optional<std::string_view> query_param(std::string_view target, std::string_view name);

}  // namespace floodgate::service
