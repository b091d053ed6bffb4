// Asio completion tokens for floodgate: co_await a check, and get the answer on your own
// executor. Opt-in (the other floodgate headers stay free of Asio); needs Boost >= 1.81
// headers, and CMake's floodgate::asio target (find_package(floodgate COMPONENTS asio)) or
// pkg-config's floodgate-asio.
//
//   namespace asio = boost::asio;
//   asio::awaitable<void> serve(floodgate::limiter& limiter, const floodgate::policy& api) {
//     auto r = co_await floodgate::async_check(limiter, user_id, api, 1, asio::use_awaitable);
//     if (!r.decision.allowed) co_return reply_429(r.decision.retry_after);
//     ...
//   }
//
// Every function takes any completion token (a callback, use_awaitable, deferred,
// use_future, as_tuple(...), bind_executor(...), bind_cancellation_slot(...)) and wraps the
// matching std::function call of limiter or semaphore, which it leaves unchanged:
//
//   async_check      void(error_code, check_result)          limiter::async_check
//   async_check_all  void(error_code, multi_check_result)    limiter::async_check_all
//   async_refund     void(error_code, check_result)          limiter::async_refund
//   async_reset      void(error_code)                        limiter::async_reset
//   async_acquire    void(error_code, acquire_result)        semaphore::async_acquire
//   async_release    void(error_code, lease_result)          semaphore::async_release
//   async_renew      void(error_code, lease_result)          semaphore::async_renew
//
// Errors. error_code is boost::system::error_code, which Asio's tokens understand
// (use_awaitable and use_future throw it as system_error, as_tuple hands it over); it holds
// floodgate's std::error_code unchanged: compare it with floodgate::errc values directly, or
// convert it (std::error_code e = ec). It is set only when the operation itself did not run to
// an answer:
//   - boost::asio::error::operation_aborted: cancelled (below); the result is empty
//     (outcome backend_error, decision.allowed false, error = operation_aborted);
//   - floodgate::errc::shutting_down: the backend was destroyed with the call pending (a
//     limiter destroyed meanwhile, below); the result is the limiter's answer to that, with
//     the policy's failure mode applied, as the callback API gives it.
// Everything else, over limit, invalid requests and backend failures included, is an outcome
// in the result with no error code, exactly as the callback API reports it (async_reset,
// which has no result, gives its error code as the operation's).
//
// Threading. The handler runs on its associated executor (the coroutine's for use_awaitable,
// the one bound with bind_executor; a plain callback with none runs on Asio's system
// executor, a thread of its own pool): posted there, never inline from the initiating call
// (the memory backend and invalid requests included) and never on floodgate's I/O thread. A
// pending operation counts as work, so io_context::run() does not return before it ends.
//
// Cancellation. A cancellation slot bound to the token (bind_cancellation_slot, a parallel
// group or awaitable operator racing a timer; cancel_after from Boost 1.86, untested) cancels
// on a terminal or partial request (a total one is ignored: see below); the handler is then
// posted at once with operation_aborted. Cancelling abandons the wait, not the call: the backend
// still decides it, and drops the answer. So a cancelled check may have been admitted, and
// have consumed its cost, in Redis (or the memory backend); a cancelled refund may have given
// back; a cancelled release may have released. Nothing tells which; cancel only what you can
// afford to have counted. A cancelled acquire that is granted all the same is released by
// the semaphore (semaphore::async_acquire_or_give_back) in the background, as long as the
// semaphore lives (one kept for the backend's life, as semaphore.hpp asks); otherwise its
// lease ends by itself after the policy's lease().
//
// Lifetimes. The limiter (or semaphore), keys, policies and items need only live until the
// operation is initiated: for callbacks, use_future and as_tuple(...) of them, until the
// function returns; for use_awaitable, the co_await expression (temporaries in it live long
// enough); for deferred, until the deferred operation is launched. After that the limiter may
// be destroyed with the operation pending: when that destroys the backend (its last owner),
// pending operations complete with floodgate::errc::shutting_down; otherwise they complete as
// usual. Destroying the handler's execution context (an io_context) with operations pending
// destroys their handlers unrun, as for Asio's own operations; floodgate's late answers are
// then dropped.
#pragma once

#include <boost/asio/async_result.hpp>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>
#include <system_error>

#include "floodgate/detail/asio_operation.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/semaphore.hpp"

namespace floodgate {

namespace detail {

// Starts `call(answer)`, one callback call of limiter or semaphore, on the caller's thread
// (async_initiate runs it); its answer completes the operation.
template <class Result>
struct initiate_call {
  template <class Handler, class Call>
  void operator()(Handler&& handler, Call call) const {
    auto op = start_operation<std::decay_t<Handler>, Result>(std::forward<Handler>(handler));
    if (op)
      call([op = std::move(op)](Result r) { op->finish(operation_error(r.error), std::move(r)); });
  }
};

// The same for semaphore::async_acquire: a lease granted after the operation ended without it
// (cancelled, or its context shut down) is given back by the semaphore, since nobody else
// will ever know its id.
struct initiate_acquire {
  template <class Handler, class Call>
  void operator()(Handler&& handler, Call call) const {
    auto op =
        start_operation<std::decay_t<Handler>, acquire_result>(std::forward<Handler>(handler));
    if (op)
      call([op = std::move(op)](acquire_result r) {
        return op->finish(operation_error(r.error), std::move(r)) ? delivery::taken
                                                                  : delivery::not_taken;
      });
  }
};

// The same for limiter::async_reset, whose answer is its error code.
struct initiate_reset {
  template <class Handler, class Call>
  void operator()(Handler&& handler, Call call) const {
    auto op = start_operation<std::decay_t<Handler>>(std::forward<Handler>(handler));
    if (op) call([op = std::move(op)](std::error_code ec) { op->finish(ec); });
  }
};

}  // namespace detail

// limiter::async_check as an Asio operation: void(error_code, check_result).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, check_result))
              CompletionToken>
auto async_check(limiter& l, std::string_view key, const policy& p, std::int64_t cost,
                 CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken,
                                     void(boost::system::error_code, check_result)>(
      detail::initiate_call<check_result>{}, token,
      [&l, key, &p, cost](auto answer) { l.async_check(key, p, cost, std::move(answer)); });
}

// limiter::async_check_all (all-or-nothing): void(error_code, multi_check_result).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, multi_check_result))
              CompletionToken>
auto async_check_all(limiter& l, std::span<const check_item> items, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken,
                                     void(boost::system::error_code, multi_check_result)>(
      detail::initiate_call<multi_check_result>{}, token,
      [&l, items](auto answer) { l.async_check_all(items, std::move(answer)); });
}

// The braced form: async_check_all(l, {{user, &per_user, 1}, {ip, &per_ip, 1}}, token). The
// list lives until the end of the full expression: enough for co_await, not for deferred.
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, multi_check_result))
              CompletionToken>
auto async_check_all(limiter& l, std::initializer_list<check_item> items, CompletionToken&& token) {
  return async_check_all(l, std::span<const check_item>(items.begin(), items.size()),
                         std::forward<CompletionToken>(token));
}

// limiter::async_refund: void(error_code, check_result).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, check_result))
              CompletionToken>
auto async_refund(limiter& l, std::string_view key, const policy& p, std::int64_t cost,
                  CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken,
                                     void(boost::system::error_code, check_result)>(
      detail::initiate_call<check_result>{}, token,
      [&l, key, &p, cost](auto answer) { l.async_refund(key, p, cost, std::move(answer)); });
}

// limiter::async_reset: void(error_code), the reset's own error code (or cancellation's).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) CompletionToken>
auto async_reset(limiter& l, std::string_view key, const policy& p, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
      detail::initiate_reset{}, token,
      [&l, key, &p](auto answer) { l.async_reset(key, p, std::move(answer)); });
}

// semaphore::async_acquire: void(error_code, acquire_result).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, acquire_result))
              CompletionToken>
auto async_acquire(semaphore& s, std::string_view key, const concurrency_policy& p,
                   CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken,
                                     void(boost::system::error_code, acquire_result)>(
      detail::initiate_acquire{}, token,
      [&s, key, &p](auto answer) { s.async_acquire_or_give_back(key, p, std::move(answer)); });
}

// semaphore::async_release: void(error_code, lease_result).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease_result))
              CompletionToken>
auto async_release(semaphore& s, std::string_view key, const concurrency_policy& p,
                   std::string_view lease, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken,
                                     void(boost::system::error_code, lease_result)>(
      detail::initiate_call<lease_result>{}, token,
      [&s, key, &p, lease](auto answer) { s.async_release(key, p, lease, std::move(answer)); });
}

// semaphore::async_renew: void(error_code, lease_result).
template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease_result))
              CompletionToken>
auto async_renew(semaphore& s, std::string_view key, const concurrency_policy& p,
                 std::string_view lease, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken,
                                     void(boost::system::error_code, lease_result)>(
      detail::initiate_call<lease_result>{}, token,
      [&s, key, &p, lease](auto answer) { s.async_renew(key, p, lease, std::move(answer)); });
}

}  // namespace floodgate
