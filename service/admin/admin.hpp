// The admin listener's endpoints (--admin-listen): what operators and their tools read, kept
// off the listener that callers reach. Pure, like the handler: a request becomes a response,
// or — for the two that ask the backend about one key — a key_request that the caller runs
// off the I/O threads (inspector.hpp in floodgated).
//
//   admin_sources s{&stats, [&] { return backend_state{b.healthy(), std::string(b.kind())}; }};
//   auto routed = route_admin(req, s);
//   if (auto* k = std::get_if<key_request>(&routed)) inspector.submit(std::move(*k), done);
//   else done(std::move(std::get<http_response>(routed)));
//
// Endpoints (docs/service.md, "Admin listener"):
//   GET /metrics            the same Prometheus text as the public listener's /metrics
//   GET /healthz, /readyz   as on the public listener
//   GET /v1/top?rule=NAME[&n=N]
//                           the N (default 10) keys of a rule most often checked and most often
//                           denied (hot_keys.hpp), when --top-keys enables them:
//                           {"rule", "interval_ms", "span_ms", "capacity", "checks", "denials",
//                            "checked": [{"key", "count", "error"}...], "denied": [...]}
//   GET /v1/status          rules with their counters, the backend, clock skew (status.hpp)
//   GET /v1/inspect?rule=NAME&key=KEY
//                           the key's state for the rule, nothing consumed (inspector.hpp)
//   POST /v1/reset?rule=NAME&key=KEY
//                           forget it; refused when the request has an Origin header (a web
//                           page in an operator's browser must not reset keys)
//   GET /ui                 the status page (ui_page.hpp)
// Query values are percent-decoded ('+' is a space). Anything else is a 404, and the public
// listener answers these admin-only paths with a 404.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "admin/admin_sources.hpp"
#include "api/http_message.hpp"
#include "config/config.hpp"
#include "config/percent_decode.hpp"

namespace floodgate::service {

// Whether a request's Host header (absent: nullopt) may reach the admin listener: an IP
// literal (IPv6 in brackets), localhost, or one of `names`, any with a port; case-insensitive.
// Why: a web page in an operator's browser can point its own DNS name at 127.0.0.1 (DNS
// rebinding) and read the admin listener as same-origin, keys included; its requests carry
// that name as Host. A request without Host (HTTP/1.0) is not a browser's.
bool admin_host_allowed(std::optional<std::string_view> host,
                        const std::vector<std::string>& names);

// A key to inspect or reset, validated: run it with the backend and answer (inspector.hpp).
struct key_request {
  enum class action { inspect, reset };
  action what = action::inspect;
  std::shared_ptr<const config> rules;  // keeps `rule` alive
  const service::rule* rule = nullptr;
  std::string key;  // decoded
};

using admin_result = std::variant<http_response, key_request>;
admin_result route_admin(const http_request& req, const admin_sources& sources);

// The value of query parameter `name` in `target` ("/path?a=1&b=2"), undecoded; nullopt when
// absent.
std::optional<std::string_view> query_param(std::string_view target, std::string_view name);
// `s` with %XX decoded and '+' as a space; nullopt when a '%' is not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s);

}  // namespace floodgate::service
