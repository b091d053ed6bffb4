// The facade callers use: validate, ask the backend, apply the failure mode.
//
//   floodgate::limiter limiter{"redis://127.0.0.1:6379"};   // or "memory://"
//   floodgate::policy api{"api", floodgate::algorithm::gcra, 100, std::chrono::minutes{1}};
//   auto r = limiter.check(user_id, api);
//   if (!r.decision.allowed) reject(r.decision.retry_after);
//
// Threading: a limiter may be used from many threads at once. One async core; the sync calls
// wait on it (so never call a sync member from inside a completion handler). Handlers of the
// async calls may run on the caller's stack (memory backend, invalid requests) or on a backend
// thread, and must not block or throw. Each handler is called exactly once, also when the
// backend throws (std::bad_alloc): that is a backend error (errc::internal_error). The
// strings passed in need only live until the call returns.
// For Asio completion tokens and coroutines answered on your own executor (never inline, never
// on a backend thread), include floodgate/asio.hpp (docs/library.md).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "floodgate/backend.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/options.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

// Builds a backend from a URL: memory://, redis://[user:password@]host:port[/db] (rediss://
// for TLS, see redis_options::tls),
// redis+cluster://[user:password@]host:port[,host:port...] (seeds of a Redis Cluster; also
// rediss+cluster://),
// redis+sentinel://[user:password@]host:port[,...]/master-name[/db] (sentinels). A Redis URL
// may end in options that override options.redis: ?timeout=100ms&connect_timeout=2s&
// connections=4&key_prefix=rl: (docs/operations.md).
// Throws config_error for a malformed or unsupported URL.
std::shared_ptr<backend> make_backend(std::string_view url, const backend_options& options = {});

namespace detail {
class deny_cache;
class local_mode;
class reservations;
}

// Counters for metrics, from any thread.
struct limiter_stats {
  std::uint64_t local_denials = 0;         // checks denied locally, without a backend call
  std::uint64_t local_denial_entries = 0;  // gauge: local denials remembered now
  std::uint64_t local_mode_decisions = 0;  // calls decided in local mode (failure_mode::local)
  bool local_mode_active = false;          // gauge: in an outage, deciding locally now
  std::int64_t instances = 1;              // gauge: N for local mode (heartbeats or fixed)
  std::uint64_t reservations = 0;          // reservations taken (policy::reserve)
  std::uint64_t reserved_units = 0;        // units they granted
  std::uint64_t reserved_decisions = 0;    // checks admitted from reserved units, no backend call
  std::uint64_t reserved_units_given_back = 0;  // unspent units returned to their window
};

// limiter_stats' reservation counters for one rule (policy name): limiter::reservation_stats().
struct rule_reservation_stats {
  std::string rule;
  std::uint64_t reservations = 0;
  std::uint64_t reserved_units = 0;
  std::uint64_t reserved_decisions = 0;
  std::uint64_t reserved_units_given_back = 0;
};

class limiter {
 public:
  explicit limiter(std::shared_ptr<backend> b, limiter_options options = {});
  explicit limiter(std::string_view url, const backend_options& backend = {},
                   limiter_options options = {});

  // Decides one request of `cost` (0 peeks) against `p` for `key`. While an earlier denial of
  // this very request runs, the answer may come from this process (check_result::local).
  check_result check(std::string_view key, const policy& p, std::int64_t cost = 1);
  void async_check(std::string_view key, const policy& p, std::int64_t cost,
                   std::function<void(check_result)> handler);

  // Decides several (key, policy, cost) items all-or-nothing: all consume or none does.
  // One item is a check() and may be denied locally. Several ask the backend, but items of
  // policies with reserve() are answered from this process's reserved units when each holds
  // its cost (then only the others ask; the units are spent only if all are admitted).
  multi_check_result check_all(std::span<const check_item> items);
  multi_check_result check_all(std::initializer_list<check_item> items) {
    return check_all(std::span<const check_item>(items.begin(), items.size()));
  }
  void async_check_all(std::span<const check_item> items,
                       std::function<void(multi_check_result)> handler);

  // Gives back `cost` (1..p.capacity()) of what (key, p) consumed, when an admitted request's
  // work did not happen; never creates capacity beyond the policy's (docs/algorithms.md,
  // "Refunds"). outcome::allowed with a peek's decision after the refund and the cost that
  // came back (check_result::refunded: 0 when nothing was consumed), or invalid_request /
  // backend_error (no failure mode applies). Drops this limiter's local denial of the key. A
  // backend error may have given back all the same (a timeout: the script may have run): give
  // an `idempotency_key` (valid_idempotency_key, one per request refunded) and retry under it;
  // a refund already made under it gives nothing back again and answers replayed with the
  // first one's `refunded` (remembered for refund_key_memory(p)).
  check_result refund(std::string_view key, const policy& p, std::int64_t cost = 1,
                      std::string_view idempotency_key = {});
  void async_refund(std::string_view key, const policy& p, std::int64_t cost,
                    std::function<void(check_result)> handler);
  void async_refund(std::string_view key, const policy& p, std::int64_t cost,
                    std::string_view idempotency_key, std::function<void(check_result)> handler);

  // Forgets (key, p)'s state, and this limiter's local denial of it. Returns an
  // invalid-request or backend error code, or {}.
  std::error_code reset(std::string_view key, const policy& p);
  void async_reset(std::string_view key, const policy& p, std::function<void(std::error_code)> h);

  backend& get_backend() noexcept { return *backend_; }
  const limiter_options& options() const noexcept { return options_; }
  limiter_stats stats() const noexcept;
  // After a reload: gives back what this process reserved under policies not in `rules`
  // (removed or changed: no later check of theirs gives it back; docs/algorithms.md,
  // "Reservations"), without waiting for the answers. Returns the grants dropped.
  std::size_t keep_reservations_of(std::span<const policy> rules);

  // The reservation counters of stats() per rule (policy name) that reserved, sorted by name;
  // at most 1024 names, the rest counted together under "(other)". A check_all of several
  // items counts one reserved decision for each rule it spent (stats(): one for the call).
  std::vector<rule_reservation_stats> reservation_stats() const;

 private:
  std::error_code validate(const check_item& item) const noexcept;
  // check() and a one-item check_all(): Result is check_result or multi_check_result.
  template <class Result>
  void check_one(const check_item& item, std::function<void(Result)> handler);
  std::int64_t steady_now() const;

  std::shared_ptr<backend> backend_;
  limiter_options options_;
  // Null when local denials are off; shared with handlers that may outlive the limiter.
  std::shared_ptr<detail::deny_cache> deny_cache_;
  // Null for the memory backend (it never fails); shared with handlers likewise.
  std::shared_ptr<detail::local_mode> local_mode_;
  // Units reserved for policies with reserve(); shared with handlers likewise.
  std::shared_ptr<detail::reservations> reservations_;
};

}  // namespace floodgate
