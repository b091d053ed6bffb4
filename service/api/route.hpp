// The HTTP handler, first half: a request becomes what to do (a check plan, a probe, or a
// finished response, usually an error). The second half, a decision becoming a response, is
// render.hpp. Pure: tested without sockets or a backend.
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
//                         (Idempotency-Key: a retry under it gives back once)
//   POST /v1/acquire      {"rule","key"} of a concurrency rule → 200 with a lease / 429
//   POST /v1/release      {"rule","key","lease"} → 200 {"released": bool}
//   POST /v1/renew        {"rule","key","lease"} → 200 {"renewed": bool}
//   GET  /v1/auth/{name}  a rule or group; keys from the rules' sources → 204 / 403 (nginx)
//   HEAD /v1/auth/{name}  the same as a peek: would a GET be admitted now? Consumes nothing
//   OPTIONS *             the server's methods (Allow)
//   GET  /healthz, /readyz, /metrics
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/http_message.hpp"
#include "config/config.hpp"
#include "config/runtime_overrides.hpp"
#include "floodgate/backend.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/semaphore.hpp"

namespace floodgate::service {

// Caps on what one request may ask (beyond each rule's own capacity).
struct request_limits {
  std::size_t max_key_size = 1024;          // bytes of one key
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
    // Points into `rules` or `live`: the rule that decides this key (an override's own rule,
    // under the rule's name, when one matches the key; config::resolve).
    const service::rule* rule;
    std::string key;
    std::int64_t cost = 1;
  };

  style kind = style::json;
  std::shared_ptr<const config> rules;    // keeps every item's rule alive until rendered
  // A run-time override's rule (runtime_overrides.hpp) lives here rather than in `rules`.
  std::shared_ptr<const runtime_snapshot> live;
  const service::group* group = nullptr;  // the group asked for, if any (points into `rules`)
  std::vector<item> items;
  std::string lease;            // release and renew: the lease id
  std::string idempotency_key;  // refund: its Idempotency-Key header, or empty
  // auth: a HEAD, checked at cost 0 (RFC 9110 9.3.2: HEAD is safe): answers whether a GET
  // would be admitted now, consumes nothing, and is not counted as a decision.
  bool peek = false;

  // The items as the limiter takes them; valid while this plan lives.
  std::vector<check_item> check_items() const;
};

enum class probe {
  healthz,      // the process is up: always 200
  readyz,       // the backend is healthy: 200, else 503
  healthcheck,  // envoyproxy/ratelimit's /healthcheck: readyz as upstream says it (200 "OK", 500)
  metrics,      // Prometheus text
};

// What a request asks for: a finished response (an error, usually), a check, or a probe.
using route_result = std::variant<http_response, check_plan, probe>;

// `live`: the run-time overrides in force (null: none); they decide before the rules' own.
route_result route(const http_request& req, std::shared_ptr<const config> rules,
                   const request_limits& limits = {},
                   std::shared_ptr<const runtime_snapshot> live = nullptr);

}  // namespace floodgate::service
