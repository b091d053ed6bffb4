// Concurrency limits: a distributed semaphore. At most `limit` holders of a key at once,
// across every process sharing the backend; each holds a lease that ends when released or
// when its time is up, so a crashed holder's slot comes back by itself (docs/algorithms.md,
// "Concurrency limits").
//
//   floodgate::concurrency_policy jobs{"jobs", 20, std::chrono::seconds{30}};
//   floodgate::semaphore sem{limiter.get_backend()};
//   auto a = sem.acquire(user_id, jobs);
//   if (a.outcome != floodgate::outcome::allowed) return reply_429(a.decision.retry_after);
//   ... long work: sem.renew(user_id, jobs, a.lease) before the lease runs out ...
//   sem.release(user_id, jobs, a.lease);
//
// Each call is one atomic step (one script in Redis). Threading and handlers as for
// floodgate::limiter: from any thread; handlers run exactly once, maybe on the caller's stack
// (memory backend, invalid requests) or on a backend thread, and must not block.
//
// An acquire that fails with a backend error (a timeout, a connection lost mid-call) may still
// have taken a slot in Redis, under an id the caller never got. The semaphore releases that id
// in the background until the backend answers (docs/algorithms.md, "Concurrency limits"), from
// a thread of its own started at the first such failure. So is a lease granted to a caller
// that no longer wants it (async_acquire_or_give_back, give_back: a cancelled operation, an
// HTTP client gone before its answer). Keep one semaphore per backend for as long as the
// backend lives (copies share that work; it stops with the last copy): a semaphore made for
// one call and dropped leaves such a slot taken until its lease ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "floodgate/backend.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

class concurrency_policy {
 public:
  static constexpr std::int64_t max_limit = 1'000'000;  // leases of one key: O(limit) state
  static constexpr std::chrono::milliseconds max_lease{1'000'000'000'000};  // ~31 years

  // Throws config_error naming the problem: a name as policy's rules ([A-Za-z0-9_.-], 1..64),
  // limit outside 1..max_limit, lease outside 1 ms..max_lease. failure_mode::local is taken
  // as closed (a semaphore cannot be split between processes).
  concurrency_policy(std::string name, std::int64_t limit, std::chrono::milliseconds lease,
                     failure_mode on_failure = failure_mode::closed);

  const std::string& name() const noexcept { return name_; }
  std::int64_t limit() const noexcept { return limit_; }
  // How long a lease lasts unless released or renewed.
  std::chrono::milliseconds lease() const noexcept { return lease_; }
  failure_mode on_failure() const noexcept { return failure_mode_; }

  friend bool operator==(const concurrency_policy&, const concurrency_policy&) = default;

 private:
  std::string name_;
  std::int64_t limit_;
  std::chrono::milliseconds lease_;
  failure_mode failure_mode_;
};

struct acquire_result {
  // allowed: `lease` holds a slot; over_limit: all `limit` slots are held; backend_error:
  // `decision.allowed` follows the failure mode (open: admitted without a lease, `lease`
  // empty); invalid_request.
  floodgate::outcome outcome = floodgate::outcome::invalid_request;
  // limit; remaining = free slots after; reset_after = until every lease has expired;
  // retry_after when refused = until the earliest lease expires (a release may free one
  // sooner).
  floodgate::decision decision;
  std::string lease;  // the lease's id (32 hex digits) when allowed
  std::error_code error;

  bool degraded() const noexcept {
    return outcome == floodgate::outcome::backend_error && decision.allowed;
  }
};

// release and renew: `done` when the lease was live (now released, or renewed); false with no
// error when it was not (released already, expired, or another key's): nothing changed.
struct lease_result {
  bool done = false;
  std::error_code error;  // invalid request or backend error
};

// What a semaphore did about acquires whose outcome is unknown (a backend error): their ids are
// released in the background until the backend answers.
struct semaphore_stats {
  std::uint64_t unsettled = 0;  // gauge: ids being released now
  // released: the failed acquire had taken a slot, or a granted lease was not taken (given
  // back); the slot is free again
  std::uint64_t reclaimed = 0;
  std::uint64_t abandoned = 0;  // given up (too many at once, or the lease ended by itself)
};

namespace detail {
class lease_reclaimer;
}

// What a backend implements to hold leases (the memory and Redis backends do).
class lease_backend {
 public:
  virtual ~lease_backend() = default;
  // One decision (see acquire_result); `id` is new (the semaphore makes it).
  virtual void async_acquire(std::string_view key, const concurrency_policy& p, std::string_view id,
                             backend_handler handler) = 0;
  // ttl 0 releases, else renews to now + ttl.
  virtual void async_release(std::string_view key, const concurrency_policy& p, std::string_view id,
                             std::chrono::milliseconds ttl,
                             std::function<void(lease_result)> handler) = 0;
};

// What an async_acquire_or_give_back handler did with its result.
enum class delivery {
  taken,      // the caller has the result (and owns its lease, if any)
  not_taken,  // nobody will use it: a lease in it is released by the semaphore
};

class semaphore {
 public:
  // `b` must outlive the semaphore; calls answer errc::unsupported when it holds no leases.
  explicit semaphore(backend& b, std::size_t max_key_size = 1024);

  acquire_result acquire(std::string_view key, const concurrency_policy& p);
  void async_acquire(std::string_view key, const concurrency_policy& p,
                     std::function<void(acquire_result)> handler);
  // As async_acquire, for a caller that may be gone when the answer comes (an operation
  // cancelled meanwhile, a client disconnected): `handler` says whether the result was taken,
  // and a lease that was not is given back (below). The handler must decide at once: the
  // answer is not held for it.
  void async_acquire_or_give_back(std::string_view key, const concurrency_policy& p,
                                  std::function<delivery(acquire_result)> handler);
  // Releases a granted `lease` that nobody will use, in the background until the backend
  // answers (as an unknown acquire's id), counted in stats().reclaimed. For callers that
  // cannot hand the lease on: the holder was gone before it learnt the id.
  void give_back(std::string_view key, const concurrency_policy& p, std::string_view lease);
  lease_result release(std::string_view key, const concurrency_policy& p, std::string_view lease);
  void async_release(std::string_view key, const concurrency_policy& p, std::string_view lease,
                     std::function<void(lease_result)> handler);
  // Extends a live lease to a full lease() from now.
  lease_result renew(std::string_view key, const concurrency_policy& p, std::string_view lease);
  void async_renew(std::string_view key, const concurrency_policy& p, std::string_view lease,
                   std::function<void(lease_result)> handler);

  semaphore_stats stats() const;

 private:
  template <class Handler>
  void start_acquire(std::string_view key, const concurrency_policy& p, Handler handler);

  backend& backend_;
  lease_backend* leases_;  // backend_ as a lease_backend, or null
  std::size_t max_key_size_;
  std::shared_ptr<detail::lease_reclaimer> reclaimer_;  // null without leases_
};

}  // namespace floodgate
