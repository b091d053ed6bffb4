// The HTTP handler, second half: a decision becomes a response (route.hpp is the first half,
// a request becoming a check plan). Pure: no sockets, no backend.
//
//   http_response res = render(plan, result);   // in the limiter's completion
//   http_response err = error_response(400, "malformed JSON");
#pragma once

#include <string>
#include <string_view>

#include "api/http_message.hpp"
#include "api/route.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/semaphore.hpp"

namespace floodgate::service {

// The answer to a check.
http_response render(const check_plan& plan, const multi_check_result& result);
// The answer to /v1/refund: 200 with "outcome" (refunded, nothing_to_refund: the key held none
// of the cost, replayed: its Idempotency-Key was used already), "refunded" (the cost given back;
// a replay's is the first refund's) and the state after; 503 "unknown" when the call may have
// run, "not_refunded" when Redis refused it; 400 for a bad request.
http_response render_refund(const check_result& result);
// The answers to /v1/acquire, and to /v1/release and /v1/renew.
http_response render_acquire(const check_plan& plan, const acquire_result& result);
http_response render_lease(const check_plan& plan, const lease_result& result);

// Whether a call that failed with `e` may still have run in Redis (a timeout, a connection
// lost mid-call, a reply we could not read): its outcome is unknown. False for what Redis
// refused with an error reply (BUSY, OOM, an error): it did not run.
bool outcome_unknown(std::error_code e) noexcept;

// "OPTIONS *" (RFC 9110 9.3.7): the methods this server takes, in Allow; no content
// (Content-Length: 0). Both listeners answer it.
http_response render_server_options();
// A request-target of "*" with another method: 400 (RFC 9112 3.2.4: for OPTIONS only).
http_response render_star_misused();

http_response render_health();
http_response render_ready(bool backend_healthy, std::string_view backend_kind);
// envoyproxy/ratelimit's /healthcheck, for probes written for it: 200 with the body "OK" when
// ready (as /readyz), else 500 with an empty body.
http_response render_healthcheck(bool backend_healthy);
http_response render_metrics(std::string text);

// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD: JSON must be UTF-8,
// and what callers send (a path, a header, a key from a header) need not be; a strict client
// refuses a whole answer over one raw byte (found by fuzz_http_request, then in /v1/top).
std::string valid_utf8(std::string_view s);

// {"error": message} with a JSON content type: 400, 404, 405, 408, 413, 431, 501, 503...
http_response error_response(int status, std::string_view message);

}  // namespace floodgate::service
