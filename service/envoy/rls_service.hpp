// The rate limit service's decisions, without gRPC: a RateLimitRequest in plain structs in,
// a RateLimitResponse out. rls_proto.cpp converts protobuf messages to and from these.
//
//   rls_service rls(limiter, store, {.response_headers = true}, &metrics);
//   rls.async_should_rate_limit(std::move(req), deadline, [](rls_result r) { ... });
//
// Semantics are envoyproxy/ratelimit's documented ones (docs/envoy.md) with one deliberate
// difference: the request's enforced descriptors are decided all-or-nothing in one atomic
// check (limiter::check_all), so when any is over its limit none consumes; a request with more
// counters than one check_all holds (limiter_options::max_items, 16 in floodgated) is decided
// in groups of that many, all-or-nothing within each. Shadow-mode rules
// are decided each on its own beside them (they never refuse, so they must not hold the others
// back). On a backend that needs one key per check_all (Redis Cluster), descriptors whose
// counters have different keys are decided separately: all-or-nothing holds only among
// descriptors of the same key there.
//
// Threading: from any thread; the handler runs on the caller's stack (memory backend, bad
// requests) or on a backend thread, exactly once, and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "envoy_config.hpp"
#include "floodgate/limiter.hpp"

namespace floodgate::service {
class runtime_overrides;  // config/runtime_overrides.hpp
}

namespace floodgate::service::envoy {

class rls_metrics;

enum class code : int { unknown = 0, ok = 1, over_limit = 2 };

struct limit_override {
  std::uint32_t requests_per_unit = 0;
  unit per = unit::unknown;
};

struct descriptor {
  std::vector<descriptor_entry> entries;
  std::optional<limit_override> limit;
  std::optional<std::uint64_t> hits_addend;  // set: overrides the request's (0 only looks)
};

struct request {
  std::string domain;
  std::vector<descriptor> descriptors;
  std::uint32_t hits_addend = 0;  // 0 means 1
};

struct reported_limit {
  std::string name;
  std::uint32_t requests_per_unit = 0;
  unit per = unit::unknown;
};

struct descriptor_status {
  code status = code::ok;
  std::optional<reported_limit> current_limit;  // none: no limit applied (or unlimited)
  std::uint32_t limit_remaining = 0;
  std::optional<std::chrono::milliseconds> duration_until_reset;
};

struct header {
  std::string key;
  std::string value;
};

struct response {
  code overall = code::ok;
  std::vector<descriptor_status> statuses;  // one per request descriptor, in order
  std::vector<header> response_headers_to_add;
};

// What the caller maps to a gRPC status: ok (a response), invalid_argument, deadline_exceeded,
// unavailable (the backend failed, under backend_failure::error).
struct rls_result {
  enum class kind { ok, invalid_argument, deadline_exceeded, unavailable } outcome = kind::ok;
  std::string message;  // for the errors
  envoy::response response;
};

// What one request may hold. Nothing here depends on what a client of Envoy sends: values
// (a path, a header) may be as long as the message allows (gRPC's 64 KiB cap), and a
// descriptor's entries beyond the config's depth simply match nothing, as upstream.
struct request_caps {
  // More descriptors than this: INVALID_ARGUMENT. Each comes from one of the route's
  // rate_limits actions in Envoy's config, so no route of a sane config reaches it.
  std::size_t max_descriptors = 256;
  // A counter key (its entries, escaped) longer than this is keyed by its SHA-256 instead, so
  // a long value costs Redis no more memory than a short one.
  std::size_t max_plain_counter_key = 256;
};

// What a call answers when the backend fails (Redis down, a timeout, a wrong password).
enum class backend_failure {
  // A gRPC error (UNAVAILABLE): Envoy's failure_mode_deny decides, as with upstream.
  error,
  // Each rule's failure_mode: open answers OK, closed (the default) OVER_LIMIT.
  rule,
};

struct rls_options {
  bool response_headers = false;  // RateLimit-Limit/-Remaining/-Reset, as upstream's option
  bool shadow_mode = false;       // global: overall OK whatever the statuses say
  backend_failure on_backend_failure = backend_failure::error;
  request_caps caps;
  // Run-time overrides (`floodgate override set envoy:DOMAIN:PATH VALUE`, envoy_rule_names.hpp):
  // a value's entry decides before the rate_limit's `overrides:`. Null: none (no --rules-from).
  const runtime_overrides* live = nullptr;
};

// The configuration in force, swapped whole on reload; a request keeps its snapshot.
class envoy_config_store {
 public:
  explicit envoy_config_store(std::shared_ptr<const envoy_config> c) : current_(std::move(c)) {}
  std::shared_ptr<const envoy_config> get() const noexcept { return current_.load(); }
  void set(std::shared_ptr<const envoy_config> c) noexcept { current_.store(std::move(c)); }

 private:
  std::atomic<std::shared_ptr<const envoy_config>> current_;
};

class rls_service {
 public:
  using clock = std::chrono::steady_clock;

  rls_service(std::shared_ptr<floodgate::limiter> limiter, const envoy_config_store& store,
              rls_options options, rls_metrics* metrics = nullptr);

  // Past `deadline` nothing is sent to the backend (deadline_exceeded).
  void async_should_rate_limit(request req, clock::time_point deadline,
                               std::function<void(rls_result)> handler);
  // The same, taking `req`'s contents and leaving in it an earlier call's request, whose memory
  // the next one can be parsed into (rls_proto.hpp): a connection's calls allocate none.
  void async_should_rate_limit_trading(request& req, clock::time_point deadline,
                                       std::function<void(rls_result)> handler);

  // Checks a request against the caps; an empty string when it is fine.
  std::string validate(const request& req) const;

  const rls_options& options() const noexcept { return options_; }
  // Whether the backend is ready, as /readyz says (what gRPC health reports).
  bool ready() const noexcept;

 private:
  std::shared_ptr<floodgate::limiter> limiter_;
  const envoy_config_store& store_;
  rls_options options_;
  rls_metrics* metrics_;
};

}  // namespace floodgate::service::envoy
