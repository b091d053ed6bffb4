// Decision → response. No I/O, no backend, no Beast.
#include "api/render.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "api/ratelimit_headers.hpp"
#include "api/shadow.hpp"

namespace floodgate::service {
namespace {

namespace json = boost::json;

http_response json_response(int status, const json::value& body) {
  http_response res;
  res.status = status;
  res.headers.emplace_back("Content-Type", "application/json");
  res.body = json::serialize(body);
  res.body += '\n';
  return res;
}

void add_decision(json::object& o, const decision& d) {
  o["allowed"] = d.allowed;
  o["limit"] = d.limit;
  o["remaining"] = d.remaining;
  o["reset_after_ms"] = d.reset_after.count();
  o["retry_after_ms"] = d.retry_after.count();
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = b < 0x80                 ? 1
                    : b >= 0xc2 && b <= 0xdf ? 2
                    : b >= 0xe0 && b <= 0xef ? 3
                    : b >= 0xf0 && b <= 0xf4 ? 4
                                             : 0;
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
      // The second byte's range excludes overlong forms, surrogates and code points > U+10FFFF.
      const unsigned char lo = k > 1 ? 0x80 : b == 0xe0 ? 0xa0 : b == 0xf0 ? 0x90 : 0x80;
      const unsigned char hi = k > 1 ? 0xbf : b == 0xed ? 0x9f : b == 0xf4 ? 0x8f : 0xbf;
      if (c < lo || c > hi) n = 0;
    }
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

http_response error_response(int status, std::string_view message) {
  json::object o;
  o["error"] = valid_utf8(message);
  return json_response(status, o);
}

bool outcome_unknown(std::error_code e) noexcept {
  return !(e == errc::server_busy || e == errc::out_of_memory || e == errc::server_error);
}

http_response render_refund(const check_result& result) {
  if (result.outcome == outcome::invalid_request)
    return error_response(400, result.error.message());
  // No failure mode applies: a refund that did not happen is said so, and one that may
  // have happened (the call timed out) says that instead.
  if (result.outcome != outcome::allowed) {
    json::object o;
    const bool unknown = outcome_unknown(result.error);
    o["error"] = valid_utf8(
        "backend unavailable (" + result.error.message() +
        (unknown ? "): the refund may or may not have been made" : "): nothing was refunded"));
    o["outcome"] = unknown ? "unknown" : "not_refunded";
    return json_response(503, o);
  }
  const auto& d = result.decision;
  json::object body;
  body["outcome"] = result.replayed       ? "replayed"
                    : result.refunded > 0 ? "refunded"
                                          : "nothing_to_refund";
  body["refunded"] = result.refunded;
  body["limit"] = d.limit;
  body["remaining"] = d.remaining;
  body["reset_after_ms"] = d.reset_after.count();
  return json_response(200, body);
}

http_response render(const check_plan& plan, const multi_check_result& result) {
  if (result.outcome == outcome::invalid_request)
    return error_response(400, result.error.message());
  // A refund is rendered by render_refund; a refund plan reaching here is a bug of ours.
  if (plan.kind == check_plan::style::refund)
    return error_response(500, "internal error: a refund rendered as a check");
  if (result.decisions.size() != plan.items.size())
    return error_response(500, "internal error: the backend answered a different number of items");
  if (is_shadow(plan)) return render_shadow(plan, result);

  const bool failed = result.outcome == outcome::backend_error;
  // A peek (HEAD /v1/auth) is always allowed by the backend: it answers whether a GET of cost 1
  // would be admitted now, i.e. every rule has 1 left. When it would not, it cannot say when.
  bool allowed = result.allowed();
  if (plan.peek && !failed)
    for (const auto& d : result.decisions) allowed = allowed && d.remaining >= 1;
  // Fail-open admissions, and every local-mode answer (limit ÷ N in this process).
  const bool degraded = (failed && allowed) || result.local_mode;

  // Headers: every policy; live counters unless the backend failed (we know nothing then).
  std::string policies;
  std::string counters;
  std::chrono::milliseconds retry_after{0};
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    const auto& p = plan.items[i].rule->policy;
    const auto& d = result.decisions[i];
    bool listed = false;
    for (std::size_t j = 0; j < i; ++j) listed = listed || plan.items[j].rule == plan.items[i].rule;
    if (!listed) {
      if (!policies.empty()) policies += ", ";
      append_policy_member(policies, p);
    }
    if (!counters.empty()) counters += ", ";
    append_ratelimit_member(counters, p, d);
    if (!d.allowed) retry_after = std::max(retry_after, d.retry_after);
  }

  http_response res;
  if (failed && !allowed) {
    res = error_response(
        503, "backend unavailable (" + result.error.message() + ") and the rule fails closed");
  } else if (plan.kind == check_plan::style::auth) {
    res.status = allowed ? 204 : 403;
  } else if (plan.kind == check_plan::style::json) {
    json::object body;
    add_decision(body, result.decisions.front());
    if (degraded) body["degraded"] = true;
    res = json_response(allowed ? 200 : 429, body);
  } else {
    json::object body;
    if (plan.group) body["group"] = plan.group->name;
    body["allowed"] = allowed;
    if (degraded) body["degraded"] = true;
    body["retry_after_ms"] = allowed ? 0 : retry_after.count();
    json::array results;
    for (std::size_t i = 0; i < plan.items.size(); ++i) {
      json::object o;
      o["rule"] = plan.items[i].rule->name();
      o["key"] = plan.items[i].key;
      add_decision(o, result.decisions[i]);
      results.push_back(std::move(o));
    }
    body["results"] = std::move(results);
    res = json_response(allowed ? 200 : 429, body);
  }

  res.headers.reserve(res.headers.size() + 3);
  res.headers.emplace_back("RateLimit-Policy", std::move(policies));
  if (!failed) res.headers.emplace_back("RateLimit", std::move(counters));
  if (!allowed && !failed && !plan.peek)
    res.headers.emplace_back("Retry-After", std::to_string(ceil_seconds(retry_after)));
  return res;
}

http_response render_acquire(const check_plan& plan, const acquire_result& result) {
  if (result.outcome == outcome::invalid_request)
    return error_response(400, result.error.message());
  const auto& d = result.decision;
  // The acquire may have run in Redis all the same: the semaphore releases its id meanwhile.
  if (result.outcome == outcome::backend_error && !d.allowed)
    return error_response(503, "backend unavailable (" + result.error.message() +
                                   ") and the rule fails closed; a slot it may have taken is "
                                   "released once the backend answers");
  json::object body;
  body["allowed"] = d.allowed;
  body["limit"] = d.limit;
  if (result.outcome == outcome::backend_error) {
    body["degraded"] = true;  // admitted without a lease: nothing to release (see above)
    return json_response(200, body);
  }
  body["remaining"] = d.remaining;
  body["reset_after_ms"] = d.reset_after.count();
  body["retry_after_ms"] = d.retry_after.count();
  if (d.allowed) {
    body["lease"] = result.lease;
    body["lease_ms"] = plan.items.front().rule->concurrency->lease().count();
    return json_response(200, body);
  }
  auto res = json_response(429, body);
  res.headers.emplace_back("Retry-After", std::to_string(ceil_seconds(d.retry_after)));
  return res;
}

http_response render_lease(const check_plan& plan, const lease_result& result) {
  if (result.error && !is_backend_error(result.error))
    return error_response(400, result.error.message());
  if (result.error)
    return error_response(503, "backend unavailable (" + result.error.message() + ")");
  json::object body;
  body[plan.kind == check_plan::style::renew ? "renewed" : "released"] = result.done;
  return json_response(200, body);
}

http_response render_server_options() {
  http_response res;
  res.headers.emplace_back("Allow", "GET, HEAD, POST, OPTIONS");
  return res;
}

http_response render_star_misused() {
  return error_response(400, "the target '*' is only for OPTIONS (RFC 9112 3.2.4)");
}

http_response render_health() {
  json::object o;
  o["status"] = "ok";
  return json_response(200, o);
}

http_response render_ready(bool backend_healthy, std::string_view backend_kind) {
  json::object o;
  o["status"] = backend_healthy ? "ready" : "backend unavailable";
  o["backend"] = backend_kind;
  return json_response(backend_healthy ? 200 : 503, o);
}

http_response render_healthcheck(bool backend_healthy) {
  http_response res;
  res.status = backend_healthy ? 200 : 500;
  res.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  if (backend_healthy) res.body = "OK";
  return res;
}

http_response render_metrics(std::string text) {
  http_response res;
  res.headers.emplace_back("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  res.body = std::move(text);
  return res;
}

}  // namespace floodgate::service
