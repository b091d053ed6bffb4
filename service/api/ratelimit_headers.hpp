// RateLimit-Policy, RateLimit and Retry-After, as draft-ietf-httpapi-ratelimit-headers
// (structured-field lists) and RFC 9110 define them.
//
//   RateLimit-Policy: "api";q=100;w=60     quota q per window w seconds
//   RateLimit: "api";r=99;t=60             r remaining now, t seconds until fully reset
//   Retry-After: 3                         seconds, when denied
//
// Seconds are rounded up: a client that waits them never comes back too early. A window
// shorter than a second advertises w=1. For token_bucket and gcra q is the sustained rate
// (limit per window); the burst shows as the most `r` can be.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::service {

// Milliseconds to whole seconds, rounded up; decision::never stays huge but finite.
std::int64_t ceil_seconds(std::chrono::milliseconds ms) noexcept;

// One list member each; join members of several with ", ".
std::string policy_member(const policy& p);
std::string ratelimit_member(const policy& p, const decision& d);
// The same, appended to `out` (no ", " before it).
void append_policy_member(std::string& out, const policy& p);
void append_ratelimit_member(std::string& out, const policy& p, const decision& d);

}  // namespace floodgate::service
