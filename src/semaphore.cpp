#include "floodgate/semaphore.hpp"

#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <optional>
#include <type_traits>

#include "floodgate/errors.hpp"
#include "lease_reclaimer.hpp"

namespace floodgate {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw config_error("concurrency policy '" + name + "': " + what);
}

// 128 bits from the OS's CSPRNG (getrandom(2)) as 32 hex digits, or nothing if it fails. An id
// is the capability to release or renew its slot, so it must be unguessable, not only unique:
// a userspace generator's ids (a std::mt19937_64's, before) give away its state, and with it
// every later id, the other holders' included (tests/unit/lease_id_test.cpp). Ids are never
// reused, so a release of an old lease can never free a newer holder's slot.
std::optional<std::string> new_lease_id() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    // Flags 0: blocks only until the kernel's pool is first seeded at boot, never after.
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(2 * sizeof bytes, '0');
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    out[2 * i] = hex[bytes[i] >> 4];
    out[2 * i + 1] = hex[bytes[i] & 15];
  }
  return out;
}

// An acquire that failed inside this process: a backend error, answered by the failure mode.
acquire_result internal_failure(const decision& on_failure) {
  acquire_result a;
  a.outcome = outcome::backend_error;
  a.error = errc::internal_error;
  a.decision = on_failure;
  return a;
}

// Waits for a handler that may run inline or on another thread (as limiter.cpp's waiter).
template <class T>
T wait_for(const std::function<void(std::function<void(T)>)>& start) {
  struct shared {
    std::optional<T> value;
    std::atomic<bool> done{false};
  };
  auto state = std::make_shared<shared>();
  start([state](T v) {
    state->value.emplace(std::move(v));
    state->done.store(true, std::memory_order_release);
    state->done.notify_one();
  });
  state->done.wait(false, std::memory_order_acquire);
  return std::move(*state->value);
}

}  // namespace

concurrency_policy::concurrency_policy(std::string name, std::int64_t limit,
                                       std::chrono::milliseconds lease, failure_mode on_failure)
    : name_(std::move(name)),
      limit_(limit),
      lease_(lease),
      failure_mode_(on_failure == failure_mode::open ? failure_mode::open : failure_mode::closed) {
  // The name's rules are policy's: build one to check them (and throw its message).
  try {
    (void)policy(name_, algorithm::fixed_window, 1, std::chrono::milliseconds{1});
  } catch (const config_error&) {
    fail(name_, "name must be 1..64 of [A-Za-z0-9_.-]");
  }
  if (limit_ < 1 || limit_ > max_limit)
    fail(name_, "limit must be in 1..1000000 (got " + std::to_string(limit_) + ")");
  if (lease_.count() < 1 || lease_ > max_lease)
    fail(name_, "lease must be in 1ms..10^12 ms (got " + std::to_string(lease_.count()) + "ms)");
}

semaphore::semaphore(backend& b, std::size_t max_key_size)
    : backend_(b), leases_(dynamic_cast<lease_backend*>(&b)), max_key_size_(max_key_size) {
  if (leases_) reclaimer_ = std::make_shared<detail::lease_reclaimer>(*leases_);
}

semaphore_stats semaphore::stats() const {
  return reclaimer_ ? reclaimer_->stats() : semaphore_stats{};
}

// `handler` answers void (it takes every result) or delivery (a lease not taken is given back).
template <class Handler>
void semaphore::start_acquire(std::string_view key, const concurrency_policy& p, Handler handler) {
  constexpr bool may_refuse =
      std::is_same_v<std::invoke_result_t<Handler&, acquire_result>, delivery>;
  acquire_result r;
  if (key.empty()) r.error = errc::empty_key;
  if (key.size() > max_key_size_) r.error = errc::key_too_long;
  if (!leases_) r.error = errc::unsupported;
  if (r.error) return (void)handler(std::move(r));
  decision on_failure;
  on_failure.allowed = p.on_failure() == failure_mode::open;
  on_failure.limit = p.limit();
  auto made = new_lease_id();
  // No OS randomness (a sandbox denying getrandom): an error, never a guessable id.
  if (!made) return (void)handler(internal_failure(on_failure));
  std::string id = std::move(*made);
  try {
    leases_->async_acquire(
        key, p, id,
        [id, on_failure, key = std::string(key), p, reclaim = std::weak_ptr(reclaimer_),
         handler = std::move(handler)](backend_reply reply) mutable {
          acquire_result a;
          if (!reply.error && reply.decisions.size() != 1) reply.error = errc::protocol_error;
          if (reply.error) {
            a.outcome =
                is_backend_error(reply.error) ? outcome::backend_error : outcome::invalid_request;
            a.error = reply.error;
            if (a.outcome == outcome::backend_error) {
              a.decision = on_failure;
              // The script may have run (or may still): release what it may have taken.
              if (auto owner = reclaim.lock()) owner->add(key, p, id);
            }
          } else {
            a.decision = reply.decisions.front();
            a.outcome = a.decision.allowed ? outcome::allowed : outcome::over_limit;
            if (a.decision.allowed) a.lease = id;
          }
          if constexpr (may_refuse) {
            // Nobody holds the id of a lease not taken: only this can free its slot early.
            const bool granted = !a.lease.empty();
            if (handler(std::move(a)) == delivery::not_taken && granted)
              if (auto owner = reclaim.lock()) owner->add(key, p, id);
          } else {
            handler(std::move(a));
          }
        });
  } catch (const std::exception&) {  // std::bad_alloc building the call: a backend error
    handler(internal_failure(on_failure));
  }
}

void semaphore::async_acquire(std::string_view key, const concurrency_policy& p,
                              std::function<void(acquire_result)> handler) {
  start_acquire(key, p, std::move(handler));
}

void semaphore::async_acquire_or_give_back(std::string_view key, const concurrency_policy& p,
                                           std::function<delivery(acquire_result)> handler) {
  start_acquire(key, p, std::move(handler));
}

void semaphore::give_back(std::string_view key, const concurrency_policy& p,
                          std::string_view lease) {
  if (reclaimer_ && !key.empty() && key.size() <= max_key_size_ && !lease.empty() &&
      lease.size() <= 64)
    reclaimer_->add(key, p, lease);
}

namespace {

void release_or_renew(lease_backend* leases, std::size_t max_key_size, std::string_view key,
                      const concurrency_policy& p, std::string_view lease,
                      std::chrono::milliseconds ttl, std::function<void(lease_result)> handler) {
  lease_result r;
  if (key.empty()) r.error = errc::empty_key;
  if (key.size() > max_key_size) r.error = errc::key_too_long;
  if (lease.empty() || lease.size() > 64) r.error = errc::invalid_lease;
  if (!leases) r.error = errc::unsupported;
  if (r.error) return handler(r);
  try {
    leases->async_release(key, p, lease, ttl, handler);
  } catch (const std::exception&) {
    handler({false, make_error_code(errc::internal_error)});
  }
}

}  // namespace

void semaphore::async_release(std::string_view key, const concurrency_policy& p,
                              std::string_view lease, std::function<void(lease_result)> handler) {
  release_or_renew(leases_, max_key_size_, key, p, lease, std::chrono::milliseconds{0},
                   std::move(handler));
}

void semaphore::async_renew(std::string_view key, const concurrency_policy& p,
                            std::string_view lease, std::function<void(lease_result)> handler) {
  release_or_renew(leases_, max_key_size_, key, p, lease, p.lease(), std::move(handler));
}

acquire_result semaphore::acquire(std::string_view key, const concurrency_policy& p) {
  return wait_for<acquire_result>([&](auto h) { async_acquire(key, p, std::move(h)); });
}

lease_result semaphore::release(std::string_view key, const concurrency_policy& p,
                                std::string_view lease) {
  return wait_for<lease_result>([&](auto h) { async_release(key, p, lease, std::move(h)); });
}

lease_result semaphore::renew(std::string_view key, const concurrency_policy& p,
                              std::string_view lease) {
  return wait_for<lease_result>([&](auto h) { async_renew(key, p, lease, std::move(h)); });
}

}  // namespace floodgate
