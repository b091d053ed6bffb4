// The backend interface: where decisions are made and state is kept.
//
// Implementations: the in-process memory backend (single node, the reference) and the Redis
// backend (one atomic Lua script per decision). Build one with make_backend(url) rather than
// by hand. Callers normally use floodgate::limiter, which validates requests and applies
// failure modes; a backend sees only valid requests.
//
// Threading: every member may be called from any thread at once. Completion handlers run
// either on the caller's stack (before async_* returns; the memory backend always does) or on
// a backend thread; they must not block. A handler is called exactly once, also when the
// backend is destroyed with calls in flight (with errc::shutting_down).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "floodgate/decision.hpp"
#include "floodgate/errors.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

struct check_item {
  std::string_view key;  // the caller's key: non-empty, within limiter_options::max_key_size
  const floodgate::policy* policy;  // never null
  std::int64_t cost;     // 0 peeks; 1..policy->capacity()
};

// On success: `error` is empty and `decisions` holds one decision per item, in order. Either
// every decision is allowed and all items consumed, or none consumed anything.
// On failure: `error` is set (a backend error code) and `decisions` is empty.
struct backend_reply {
  std::error_code error;
  std::vector<decision> decisions;
  // async_refund: the cost given back (as check_result::refunded), and whether its idempotency
  // key had been used already (as check_result::replayed).
  std::int64_t refunded = 0;
  bool replayed = false;
};

// Counters for metrics, monotonic since the backend was built (a gauge where noted); each
// backend fills the ones that apply to it.
struct backend_stats {
  std::uint64_t redirections = 0;    // MOVED and ASK replies followed
  std::uint64_t failovers_seen = 0;  // slot-map refreshes in which a master lost all its slots
  std::uint64_t breaker_opens = 0;   // times a node's circuit breaker opened
  std::uint64_t breakers_open = 0;   // gauge: nodes whose breaker is open (or half-open) now
  std::uint64_t script_reloads = 0;  // SCRIPT LOADs after NOSCRIPT (restart, failover, FLUSH)
  std::uint64_t nodes_retired = 0;   // Cluster nodes dropped after leaving the slot map
  std::uint64_t nodes_known = 0;     // gauge: Cluster nodes connected to (or connecting) now
  std::uint64_t keys = 0;            // gauge, memory backend: keys held now
  std::uint64_t evictions = 0;       // memory backend: live keys dropped at max_keys
};

using backend_handler = std::function<void(backend_reply)>;

// A refund's idempotency key: 1..64 bytes of [A-Za-z0-9_.:-] (a UUID fits). No braces, so in
// Redis it keeps its state key's hash slot.
bool valid_idempotency_key(std::string_view k) noexcept;

// How long a refund's idempotency key is remembered: the policy's window (what a request
// consumed counts that long at most), at least a minute (for retries), at most a day (memory).
std::chrono::milliseconds refund_key_memory(const policy& p) noexcept;
using reset_handler = std::function<void(std::error_code)>;

// A reservation's answer (backend::async_reserve). On success `error` is empty, `granted` is
// what was taken (0..wanted), `window` the window it was recorded in (floor(now / W) on the
// backend's clock; a give-back names it) and `spend_within` how long from the backend's now
// it may be spent (until that window ends; 0 for algorithms without a derived bound), and
// `after` is a peek of the key after the grant, with retry_after the time until one more unit
// is left when none is.
struct reserve_reply {
  std::error_code error;
  std::int64_t granted = 0;
  std::int64_t window = 0;
  std::chrono::milliseconds spend_within{0};
  decision after;
};

class backend {
 public:
  virtual ~backend() = default;

  // Decides all items as one atomic step. The items' strings and policies need only live
  // until async_check returns.
  virtual void async_check(std::span<const check_item> items, backend_handler handler) = 0;

  // Gives back item.cost (1..capacity) of what (key, policy) consumed, never creating capacity
  // beyond the policy's (docs/algorithms.md, "Refunds"), as one atomic step; a penalty's block
  // stays. Answers one decision: a peek (cost 0) after the refund, and `refunded`.
  // `idempotency_key` (empty: none; else valid_idempotency_key): a refund of (key, policy)
  // under a key already used for it within refund_key_memory(policy) gives nothing back and
  // answers the peek, `replayed` and the first refund's `refunded`. Backends that keep no state
  // answer errc::unsupported.
  virtual void async_refund(const check_item& item, std::string_view idempotency_key,
                            backend_handler handler) {
    (void)item;
    (void)idempotency_key;
    handler({make_error_code(errc::unsupported), {}});
  }

  // Takes up to `wanted` (>= 1) units of (key, policy)'s quota as one atomic step: min(wanted,
  // what a request could be admitted now), recorded exactly as one admitted request of that
  // cost (docs/algorithms.md, "Reservations"). Backends that keep no state answer
  // errc::unsupported.
  virtual void async_reserve(std::string_view key, const policy& p, std::int64_t wanted,
                             std::function<void(reserve_reply)> handler) {
    (void)key;
    (void)p;
    (void)wanted;
    handler({make_error_code(errc::unsupported), 0, 0, {}, {}});
  }

  // Returns up to `units` (>= 1) of a reservation not spent, to the window `window` its
  // reserve_reply named, as one atomic step, and only while that window is current: the
  // window's count (fixed_window; sliding_window's current one) drops by at most `units`
  // (docs/algorithms.md, "Reservations"). `id` (valid_idempotency_key, one per grant): a
  // give-back under an id already used answers the first one's units and `replayed`, and
  // returns nothing again. Answers no decisions: `refunded` = the units given back. Backends
  // that keep no state answer errc::unsupported.
  virtual void async_give_back(std::string_view key, const policy& p, std::int64_t window,
                               std::int64_t units, std::string_view id, backend_handler handler) {
    (void)key;
    (void)p;
    (void)window;
    (void)units;
    (void)id;
    handler({make_error_code(errc::unsupported), {}});
  }

  // Forgets the state of (key, policy): the next check sees full capacity.
  virtual void async_reset(std::string_view key, const policy& p, reset_handler handler) = 0;

  // Whether the backend can currently serve calls (for readiness probes); cheap. False also
  // while calls fail for a reason that will not heal by itself (a Redis ACL without EVALSHA).
  virtual bool healthy() const noexcept = 0;

  // Why connecting or calls failed most recently, with the server's own words (WRONGPASS,
  // NOPERM, a bad db index, an unresolvable host, a Redis too old), for logs; empty when
  // nothing failed since the backend last connected and answered. From any thread.
  virtual std::string last_error() const { return {}; }

  // A short name for logs and metrics: "memory", "redis", "redis-cluster".
  virtual std::string_view kind() const noexcept = 0;

  // Redirections, failovers and circuit breakers seen so far; cheap, from any thread.
  virtual backend_stats stats() const noexcept { return {}; }

  // Records that `instance` is alive for `ttl`, and answers how many instances are (for local
  // mode's limit ÷ N). A backend that is not shared answers 1.
  virtual void async_heartbeat(std::string_view instance, std::chrono::milliseconds ttl,
                               std::function<void(std::error_code, std::int64_t)> handler) {
    (void)instance;
    (void)ttl;
    handler({}, 1);
  }

  // True when a check_all is only sure to run if its items share one caller key: on Redis
  // Cluster the caller key is the hash tag, so different keys may live on different nodes
  // and one script cannot decide them (async_check answers errc::cross_slot). Services check
  // their groups of policies against it at start-up.
  virtual bool check_all_needs_one_key() const noexcept { return false; }
};

}  // namespace floodgate
