#include "floodgate/limiter.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/reserve.hpp"
#include "deny_cache.hpp"
#include "failure.hpp"
#include "floodgate/errors.hpp"
#include "local_mode.hpp"
#include "reservations.hpp"

namespace floodgate {
namespace {

// Waits for a handler that may complete inline (memory backend) or on another thread. The
// handler shares the state: it may still be inside notify_one when the waiter, woken by the
// store, returns and is destroyed, so the atomic must not live in the waiter's frame.
template <class T>
class waiter {
 public:
  auto handler() {
    return [state = state_](T value) {
      state->value.emplace(std::move(value));
      state->done.store(true, std::memory_order_release);
      state->done.notify_one();
    };
  }
  T get() {
    state_->done.wait(false, std::memory_order_acquire);
    return std::move(*state_->value);
  }

 private:
  struct shared {
    std::optional<T> value;
    std::atomic<bool> done{false};
  };
  std::shared_ptr<shared> state_ = std::make_shared<shared>();
};

using detail::failure_decision;
using detail::failed_outcome;

// Decisions kept in case the backend fails: the handler may run after the caller's items
// and policies are gone, so it must not read them.
std::vector<decision> failure_decisions(std::span<const check_item> items) {
  std::vector<decision> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(failure_decision(*item.policy));
  return out;
}

// A backend's reply to a single check, with the failure mode applied.
check_result single_result(backend_reply& reply, const decision& on_failure) {
  if (!reply.error && reply.decisions.size() != 1) reply.error = errc::protocol_error;
  if (reply.error) return detail::failed_check(reply.error, on_failure);
  check_result r;
  r.decision = reply.decisions.front();
  r.outcome = r.decision.allowed ? outcome::allowed : outcome::over_limit;
  return r;
}

// A local-mode decision (failure_mode::local) of items, as a multi_check_result.
multi_check_result local_mode_result(detail::local_mode& lm, std::span<const check_item> items,
                                     std::error_code why) {
  backend_reply reply = lm.decide(items);
  multi_check_result r;
  r.decisions = std::move(reply.decisions);
  const bool all = std::all_of(r.decisions.begin(), r.decisions.end(),
                               [](const decision& d) { return d.allowed; });
  r.outcome = all ? outcome::allowed : outcome::over_limit;
  r.error = why;
  r.local_mode = true;
  return r;
}

check_result local_mode_result(detail::local_mode& lm, const check_item& item,
                               std::error_code why) {
  auto m = local_mode_result(lm, std::span(&item, 1), why);
  check_result r;
  r.decision = m.decisions.front();
  r.outcome = m.outcome;
  r.error = why;
  r.local_mode = true;
  return r;
}

// A one-item check in the shape its caller asked for: check() and a one-item check_all()
// take one path (limiter::check_one). The backend's reply, the hot path, is read straight into
// either shape; the rare answers (refused, a remembered denial, local mode) are made as a
// check_result and given check_all's shape by from().
template <class Result>
struct shape;

template <>
struct shape<check_result> {
  static check_result from(check_result r) { return r; }
  static check_result reply(backend_reply& reply, const decision& on_failure) {
    return single_result(reply, on_failure);
  }
  static const decision& decided(const check_result& r) { return r.decision; }
};

template <>
struct shape<multi_check_result> {
  static multi_check_result from(const check_result& r) {
    multi_check_result m;
    m.outcome = r.outcome;
    m.error = r.error;
    m.local = r.local;
    m.local_mode = r.local_mode;
    if (r.outcome != outcome::invalid_request) m.decisions.push_back(r.decision);
    return m;
  }
  // The reply's one decision is moved, not copied into a second vector.
  static multi_check_result reply(backend_reply& reply, const decision& on_failure) {
    multi_check_result r;
    if (!reply.error && reply.decisions.size() != 1) reply.error = errc::protocol_error;
    if (reply.error) {
      r.outcome = failed_outcome(reply.error);
      r.error = reply.error;
      if (r.outcome == outcome::backend_error) r.decisions.push_back(on_failure);
    } else {
      r.decisions = std::move(reply.decisions);
      r.outcome = r.decisions.front().allowed ? outcome::allowed : outcome::over_limit;
    }
    return r;
  }
  static const decision& decided(const multi_check_result& r) { return r.decisions.front(); }
};

bool same_state(const check_item& a, const check_item& b) {
  return a.key == b.key && detail::same_state(*a.policy, *b.policy);
}

// One backend call's caller: answered exactly once, by the backend's reply or, if the backend
// throws instead (std::bad_alloc building the call), by an internal_error that the failure
// mode applies to. Shared by the backend's handler and the throwing frame; it replaces the
// handler the lambda would capture anyway, so it costs no extra allocation.
template <class Result, class OnFailure>
struct pending_call {
  pending_call(std::function<void(Result)> h, OnFailure f)
      : handler(std::move(h)), on_failure(std::move(f)) {}
  std::function<void(Result)> handler;
  OnFailure on_failure;  // what the failure mode answers (per item for check_all)
  std::atomic<bool> answered{false};

  bool claim() noexcept { return !answered.exchange(true, std::memory_order_acq_rel); }
};

// Local countdowns run on the test clock when there is one, else on the steady clock.
std::int64_t steady_ms(const clock_fn& clock) {
  if (clock) return clock().count();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Runs `call_backend`; an exception from it is answered as `failed` unless the handler ran.
// Handlers must not throw (limiter.hpp): one that does is not answered twice either.
template <class Pending, class Call, class Failed>
void guarded(const std::shared_ptr<Pending>& pending, Call&& call_backend, Failed&& failed) {
  try {
    call_backend();
  } catch (...) {
    if (pending->claim()) failed();
  }
}

}  // namespace

limiter::limiter(std::shared_ptr<backend> b, limiter_options options)
    : backend_(std::move(b)), options_(std::move(options)) {
  if (!backend_) throw config_error("limiter: backend must not be null");
  // The memory backend decides in-process already: remembering its denials would only cost.
  if (options_.local_denials && backend_->kind() != "memory" &&
      options_.max_local_denial.count() > 0 && options_.max_local_denial_entries > 0)
    deny_cache_ = std::make_shared<detail::deny_cache>(
        options_.max_local_denial_entries, options_.max_local_denial.count(),
        options_.clock ? 0 : 1);
  if (backend_->kind() != "memory")
    local_mode_ = std::make_shared<detail::local_mode>(backend_, options_);
  reservations_ = std::make_shared<detail::reservations>(
      backend_, [clock = options_.clock] { return steady_ms(clock); },
      options_.max_reservations);
}

namespace {
// A backend on a test clock decides on that clock, so local denials must count down on it.
limiter_options with_backend_clock(limiter_options o, const backend_options& b) {
  if (!o.clock) o.clock = b.redis.test_clock;
  return o;
}
}  // namespace

limiter::limiter(std::string_view url, const backend_options& backend, limiter_options options)
    : limiter(make_backend(url, backend), with_backend_clock(std::move(options), backend)) {}

std::int64_t limiter::steady_now() const { return steady_ms(options_.clock); }

std::size_t limiter::keep_reservations_of(std::span<const policy> rules) {
  return reservations_->keep_only(rules);
}

std::vector<rule_reservation_stats> limiter::reservation_stats() const {
  return reservations_->by_rule();
}

limiter_stats limiter::stats() const noexcept {
  limiter_stats s;
  if (deny_cache_) {
    s.local_denials = deny_cache_->hits();
    s.local_denial_entries = deny_cache_->size();
  }
  s.reservations = reservations_->taken();
  s.reserved_units = reservations_->units();
  s.reserved_decisions = reservations_->spent();
  s.reserved_units_given_back = reservations_->given_back();
  if (local_mode_) {
    s.local_mode_decisions = local_mode_->decisions();
    s.local_mode_active = local_mode_->in_outage();
    s.instances = local_mode_->instances();
  }
  return s;
}

std::error_code limiter::validate(const check_item& item) const noexcept {
  if (item.key.empty()) return errc::empty_key;
  if (item.key.size() > options_.max_key_size) return errc::key_too_long;
  if (item.cost < 0) return errc::invalid_cost;
  if (item.cost > item.policy->capacity()) return errc::cost_exceeds_limit;
  return {};
}

void limiter::async_check_all(std::span<const check_item> items,
                              std::function<void(multi_check_result)> handler) {
  auto invalid = [&](std::error_code ec) {
    multi_check_result r;
    r.outcome = outcome::invalid_request;
    r.error = ec;
    handler(std::move(r));
  };
  if (items.empty()) return invalid(errc::no_items);
  if (items.size() > options_.max_items) return invalid(errc::too_many_items);
  // All-or-nothing of one item is that item's check (so it may be denied locally too: a
  // service's one-rule checks), answered in check_all's shape.
  if (items.size() == 1) return check_one<multi_check_result>(items[0], std::move(handler));
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto ec = validate(items[i])) return invalid(ec);
    for (std::size_t j = 0; j < i; ++j)
      if (same_state(items[i], items[j])) return invalid(errc::duplicate_item);
  }
  // Not denied locally (all-or-nothing denials are not remembered), but what it may consume
  // must not leave a remembered retry time too early.
  if (deny_cache_)
    for (const auto& item : items)
      if (item.cost > 0) deny_cache_->forget(item.key, *item.policy);
  // Items of reserving policies are answered from this process's units when each holds its
  // cost (the other items, if any, still ask the backend, all-or-nothing).
  if (std::any_of(items.begin(), items.end(),
                  [](const check_item& item) { return item.policy->reserve() > 0; }) &&
      reservations_->check_all(items, handler))
    return;
  // Local mode applies when every item's policy has it (in a mix, local-mode items fail
  // closed: all-or-nothing across a local and a shared decision would mean nothing).
  if (local_mode_ && std::all_of(items.begin(), items.end(), [](const check_item& item) {
        return item.policy->on_failure() == failure_mode::local;
      })) {
    const auto route = local_mode_->route_now();
    if (route == detail::local_mode::route::local)
      return handler(local_mode_result(*local_mode_, items, local_mode_->last_failure()));
    // The items are copied: the caller's need only live until this call returns.
    std::vector<std::string> keys;
    std::vector<policy> policies;
    std::vector<std::int64_t> costs;
    for (const auto& item : items) {
      keys.emplace_back(item.key);
      policies.push_back(*item.policy);
      costs.push_back(item.cost);
    }
    handler = [lm = local_mode_, route, keys = std::move(keys), policies = std::move(policies),
               costs = std::move(costs), handler = std::move(handler)](multi_check_result r) {
      if (r.outcome == outcome::backend_error) {
        lm->failed(route, r.error);
        std::vector<check_item> again;
        for (std::size_t i = 0; i < keys.size(); ++i)
          again.push_back({keys[i], &policies[i], costs[i]});
        return handler(local_mode_result(*lm, again, r.error));
      }
      if (r.outcome == outcome::invalid_request)
        lm->not_asked(route);
      else
        lm->answered(route);
      handler(std::move(r));
    };
  }
  auto pending =
      std::make_shared<pending_call<multi_check_result, std::vector<decision>>>(
      std::move(handler), failure_decisions(items));
  auto answer = [pending](backend_reply reply) {
    if (!pending->claim()) return;
    multi_check_result r;
    if (!reply.error && reply.decisions.size() != pending->on_failure.size())
      reply.error = errc::protocol_error;
    if (reply.error) {
      r.outcome = failed_outcome(reply.error);
      r.error = reply.error;
      if (r.outcome == outcome::backend_error) r.decisions = pending->on_failure;
    } else {
      r.decisions = std::move(reply.decisions);
      bool all = true;
      for (const auto& d : r.decisions) all = all && d.allowed;
      r.outcome = all ? outcome::allowed : outcome::over_limit;
    }
    pending->handler(std::move(r));
  };
  guarded(
      pending, [&] { backend_->async_check(items, answer); },
      [&] {
        multi_check_result r;
        r.outcome = outcome::backend_error;
        r.error = errc::internal_error;
        r.decisions = pending->on_failure;
        pending->handler(std::move(r));
      });
}

// One item without check_all's containers: it is the hot path.
void limiter::async_check(std::string_view key, const policy& p, std::int64_t cost,
                          std::function<void(check_result)> handler) {
  check_one<check_result>({key, &p, cost}, std::move(handler));
}

template <class Result>
void limiter::check_one(const check_item& item, std::function<void(Result)> handler) {
  using answer = shape<Result>;
  if (auto ec = validate(item)) {
    check_result refused;
    refused.error = ec;
    return handler(answer::from(refused));
  }
  const policy& p = *item.policy;
  // A policy with reservations admits from this process's units when it holds enough, or
  // takes a reservation; else (none to take now) it asks the backend below.
  if (p.reserve() > 0 && item.cost > 0) {
    if (reservations_->check(item.key, p, item.cost, handler, answer::from)) return;
    // The backend's answer sizes a bucket's or a log's next reservation, and a denial holds it
    // off for a window (docs/algorithms.md, "Reservations").
    if (!core::windowed(p.algo()))
      handler = [weak = std::weak_ptr(reservations_), key = std::string(item.key), p,
                 handler = std::move(handler)](Result r) {
        if ((r.outcome == outcome::allowed || r.outcome == outcome::over_limit) && !r.local)
          if (auto s = weak.lock()) s->observe(key, p, answer::decided(r));
        handler(std::move(r));
      };
  }
  bool probing = false;
  if (local_mode_ && p.on_failure() == failure_mode::local) {
    const auto route = local_mode_->route_now();
    probing = route == detail::local_mode::route::probe;
    if (route == detail::local_mode::route::local)
      return handler(
          answer::from(local_mode_result(*local_mode_, item, local_mode_->last_failure())));
    handler = [lm = local_mode_, route, key = std::string(item.key), p, cost = item.cost,
               handler = std::move(handler)](Result r) {
      if (r.outcome == outcome::backend_error) {
        lm->failed(route, r.error);
        return handler(
            answer::from(local_mode_result(*lm, check_item{key, &p, cost}, r.error)));
      }
      if (r.outcome == outcome::invalid_request)
        lm->not_asked(route);
      else
        lm->answered(route);
      handler(std::move(r));
    };
  }
  // Read before sending: the backend decides at some later instant, so a countdown from here
  // ends no later than its retry time.
  // A probe asks the backend itself: only its answer may end an outage.
  const bool remember =
      deny_cache_ && item.cost > 0 && p.local_denials() == local_denials::on && !probing;
  const std::int64_t sent = remember ? steady_now() : 0;
  if (remember) {
    if (auto d = deny_cache_->find(item.key, p, item.cost, sent)) {
      check_result remembered;
      remembered.outcome = outcome::over_limit;
      remembered.decision = *d;
      remembered.local = true;
      return handler(answer::from(remembered));
    }
  }
  auto pending =
      std::make_shared<pending_call<Result, decision>>(std::move(handler), failure_decision(p));
  auto thrown = [&] {
    backend_reply reply;
    reply.error = errc::internal_error;
    pending->handler(answer::reply(reply, pending->on_failure));
  };
  if (!remember) {
    return guarded(
        pending,
        [&] {
          backend_->async_check(std::span(&item, 1), [pending](backend_reply reply) {
            if (pending->claim()) pending->handler(answer::reply(reply, pending->on_failure));
          });
        },
        thrown);
  }
  // The key and policy are copied: a denial must be remembered after the caller's are gone.
  guarded(
      pending,
      [&] {
        backend_->async_check(
            std::span(&item, 1),
            [pending, cache = deny_cache_, key = std::string(item.key), p, cost = item.cost, sent,
             epoch = deny_cache_->epoch()](backend_reply reply) {
              if (!pending->claim()) return;
              Result r = answer::reply(reply, pending->on_failure);
              if (r.outcome == outcome::allowed || r.outcome == outcome::over_limit)
                cache->learn(key, p, cost, sent, epoch, answer::decided(r));
              pending->handler(std::move(r));
            });
      },
      thrown);
}

multi_check_result limiter::check_all(std::span<const check_item> items) {
  waiter<multi_check_result> w;
  async_check_all(items, w.handler());
  return w.get();
}

check_result limiter::check(std::string_view key, const policy& p, std::int64_t cost) {
  waiter<check_result> w;
  async_check(key, p, cost, w.handler());
  return w.get();
}

void limiter::async_refund(std::string_view key, const policy& p, std::int64_t cost,
                           std::function<void(check_result)> handler) {
  async_refund(key, p, cost, {}, std::move(handler));
}

void limiter::async_refund(std::string_view key, const policy& p, std::int64_t cost,
                           std::string_view idempotency_key,
                           std::function<void(check_result)> handler) {
  const check_item item{key, &p, cost};
  auto ec = validate(item);
  if (!ec && cost < 1) ec = errc::invalid_cost;  // a refund of nothing is a mistake
  if (!ec && !idempotency_key.empty() && !valid_idempotency_key(idempotency_key))
    ec = errc::invalid_idempotency_key;
  if (ec) {
    check_result r;
    r.outcome = outcome::invalid_request;
    r.error = ec;
    return handler(r);
  }
  // Capacity comes back: a remembered denial would refuse what the backend now admits.
  if (deny_cache_) deny_cache_->forget(key, p);
  auto pending = std::make_shared<pending_call<check_result, int>>(std::move(handler), 0);
  auto answer = [pending](backend_reply reply) {
    if (!pending->claim()) return;
    check_result r;
    if (!reply.error && reply.decisions.size() != 1) reply.error = errc::protocol_error;
    if (reply.error) {
      r.outcome = failed_outcome(reply.error);
      r.error = reply.error;
    } else {
      r.outcome = outcome::allowed;
      r.decision = reply.decisions.front();
      r.refunded = reply.refunded;
      r.replayed = reply.replayed;
    }
    pending->handler(std::move(r));
  };
  guarded(
      pending, [&] { backend_->async_refund(item, idempotency_key, answer); },
      [&] {
        check_result r;
        r.outcome = outcome::backend_error;
        r.error = errc::internal_error;
        pending->handler(std::move(r));
      });
}

check_result limiter::refund(std::string_view key, const policy& p, std::int64_t cost,
                             std::string_view idempotency_key) {
  waiter<check_result> w;
  async_refund(key, p, cost, idempotency_key, w.handler());
  return w.get();
}

void limiter::async_reset(std::string_view key, const policy& p,
                          std::function<void(std::error_code)> handler) {
  if (key.empty()) return handler(errc::empty_key);
  if (key.size() > options_.max_key_size) return handler(errc::key_too_long);
  if (p.reserve() > 0) reservations_->forget(key, p);
  if (!deny_cache_) return backend_->async_reset(key, p, std::move(handler));
  // Dropped once the backend has reset: a denial decided before it may still arrive until then.
  backend_->async_reset(key, p, [cache = deny_cache_, key = std::string(key), p,
                                 handler = std::move(handler)](std::error_code ec) {
    cache->reset(key, p);
    handler(ec);
  });
}

std::error_code limiter::reset(std::string_view key, const policy& p) {
  waiter<std::error_code> w;
  async_reset(key, p, w.handler());
  return w.get();
}

}  // namespace floodgate
