// The HTTP handler: a pure function of (request, decision) → response, in two halves so it is
// tested without sockets or a backend.
//
//   auto routed = route(req, store.get());            // request → what to do
//   if (auto* plan = std::get_if<check_plan>(&routed))
//     limiter.async_check_all(plan->check_items(), [plan](multi_check_result r) {
//       http_response res = render(*plan, r);          // decision → response
//     });
//
// Endpoints (docs/service.md has the reference):
//   POST /v1/check        {"rule","key","cost"}, {"rules":[...]} or {"group","key","cost"}
//                                                                   → 200 / 429 (JSON)
//   POST /v1/refund       {"rule","key","cost"}: gives back what a request consumed → 200
//   POST /v1/acquire      {"rule","key"} of a concurrency rule → 200 with a lease / 429
//   POST /v1/release      {"rule","key","lease"} → 200 {"released": bool}
//   POST /v1/renew        {"rule","key","lease"} → 200 {"renewed": bool}
//   GET  /v1/auth/{name}  a rule or group; keys from the rules' sources → 204 / 403 (nginx)
//   GET  /healthz, /readyz, /metrics
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config.hpp"
#include "floodgate/backend.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/semaphore.hpp"
#include "http_message.hpp"

namespace floodgate::service {

// Caps on what one request may ask (beyond each rule's own capacity).
struct request_limits {
  std::size_t max_key_size = 1024;  // bytes of one key
  std::size_t max_items = max_group_rules;  // entries of one {"rules": [...]} check
};

// A check to run: which (rule, key, cost) items, and how to answer.
struct check_plan {
  enum class style {
    json,        // POST /v1/check {"rule": ...}: 200/429 with a JSON body
    json_multi,  // {"rules": [...]} or {"group": ...}: all-or-nothing, 200/429 per-rule results
    auth,        // GET /v1/auth/{rule}: 204/403, no body
    refund,      // POST /v1/refund: one item, limiter::async_refund, 200 with the state after
    acquire,     // POST /v1/acquire: one concurrency rule, semaphore::async_acquire
    release,     // POST /v1/release: semaphore::async_release of `lease`
    renew,       // POST /v1/renew: semaphore::async_renew of `lease`
  };
  struct item {
    const service::rule* rule;  // points into `rules`
    std::string key;
    std::int64_t cost = 1;
  };

  style kind = style::json;
  std::shared_ptr<const config> rules;  // keeps every item's rule alive until rendered
  const service::group* group = nullptr;  // the group asked for, if any (points into `rules`)
  std::vector<item> items;
  std::string lease;  // release and renew: the lease id

  // The items as the limiter takes them; valid while this plan lives.
  std::vector<check_item> check_items() const;
};

enum class probe {
  healthz,  // the process is up: always 200
  readyz,   // the backend is healthy: 200, else 503
  metrics,  // Prometheus text
};

// What a request asks for: a finished response (an error, usually), a check, or a probe.
using route_result = std::variant<http_response, check_plan, probe>;

route_result route(const http_request& req, std::shared_ptr<const config> rules,
                   const request_limits& limits = {});

// The answer to a check.
http_response render(const check_plan& plan, const multi_check_result& result);
// The answers to /v1/acquire, and to /v1/release and /v1/renew.
http_response render_acquire(const check_plan& plan, const acquire_result& result);
http_response render_lease(const check_plan& plan, const lease_result& result);

http_response render_health();
http_response render_ready(bool backend_healthy, std::string_view backend_kind);
http_response render_metrics(std::string text);

// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD: JSON must be UTF-8,
// and what callers send (a path, a header, a key from a header) need not be; a strict client
// refuses a whole answer over one raw byte (found by fuzz_http_request, then in /v1/top).
std::string valid_utf8(std::string_view s);

// {"error": message} with a JSON content type: 400, 404, 405, 408, 413, 431, 501, 503...
http_response error_response(int status, std::string_view message);

}  // namespace floodgate::service
