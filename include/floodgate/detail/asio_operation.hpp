// Internals of floodgate/asio.hpp: one pending floodgate call seen as an Asio asynchronous
// operation. Include floodgate/asio.hpp instead.
//
// A call starts with its completion handler moved into an `operation`, which is registered
// with the handler's execution context (an io_context, a thread_pool, the system context).
// The first of three things to happen decides how it ends, under the registry's lock:
//   - floodgate answers (on its I/O thread, or inline): the handler is posted to its
//     associated executor with the answer;
//   - the bound cancellation slot fires: the handler is posted with operation_aborted, and the
//     answer, when it comes, is dropped;
//   - the execution context shuts down (io_context destroyed): the handler is destroyed
//     unrun, on the thread destroying the context, as Asio's own I/O objects do.
// Posting and the work guard touch the context only under the lock, so floodgate's thread
// never reaches a context that is being destroyed.
//
//   auto op = detail::start_operation<std::decay_t<Handler>, check_result>(std::move(handler));
//   if (op) limiter.async_check(key, p, cost, [op](check_result r) { op->finish({}, r); });
#pragma once

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/is_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "floodgate/decision.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::detail {

// An operation as its execution context's registry sees it.
class operation_base {
 public:
  virtual ~operation_base() = default;

 private:
  friend class operation_registry;
  // The context is shutting down: destroy the handler unrun. Called once, without the lock,
  // after the registry claimed the operation.
  virtual void abandon() noexcept = 0;

  // The registry's list, guarded by its mutex. self_ keeps a linked operation alive; it is
  // empty once the operation has been claimed (unlinked), which is how claim() tells.
  operation_base* prev_ = nullptr;
  operation_base* next_ = nullptr;
  std::shared_ptr<operation_base> self_;
};

// The operations still pending on one execution context. Shared by the context's service
// and every operation, so an answer arriving after the context is gone finds it here.
class operation_registry {
 public:
  // Links `op`; false once the context has shut down (the caller then drops the handler).
  bool add(std::shared_ptr<operation_base> op) {
    std::lock_guard lock(mutex_);
    if (shut_down_) return false;
    operation_base& o = *op;
    o.self_ = std::move(op);
    o.next_ = head_;
    if (head_) head_->prev_ = &o;
    head_ = &o;
    return true;
  }

  // Claims `op` and runs `complete` under the lock (it posts to the context, which cannot be
  // shut down meanwhile); false, without running it, when something else ended `op` first.
  template <class F>
  bool claim(operation_base& op, F&& complete) {
    std::shared_ptr<operation_base> keep;  // released after the lock: it may be the last owner
    std::lock_guard lock(mutex_);
    if (!op.self_) return false;
    keep = unlink(op);
    std::forward<F>(complete)();
    return true;
  }

  // The context is shutting down: ends every pending operation without running its handler.
  void shutdown() noexcept {
    std::vector<std::shared_ptr<operation_base>> ops;
    {
      std::lock_guard lock(mutex_);
      shut_down_ = true;
      while (head_) ops.push_back(unlink(*head_));
    }
    // Without the lock: destroying a handler may destroy a limiter, whose backend then
    // answers other operations of this registry.
    for (auto& op : ops) op->abandon();
  }

 private:
  std::shared_ptr<operation_base> unlink(operation_base& op) noexcept {
    if (op.prev_)
      op.prev_->next_ = op.next_;
    else
      head_ = op.next_;
    if (op.next_) op.next_->prev_ = op.prev_;
    op.prev_ = op.next_ = nullptr;
    return std::move(op.self_);
  }

  std::mutex mutex_;
  operation_base* head_ = nullptr;  // guarded by mutex_
  bool shut_down_ = false;          // guarded by mutex_
};

// Owns the registry of one execution context; Asio calls shutdown() when the context goes.
class operation_service : public boost::asio::execution_context::service {
 public:
  static inline boost::asio::execution_context::id id;

  explicit operation_service(boost::asio::execution_context& context) : service(context) {}

  const std::shared_ptr<operation_registry>& registry() const noexcept { return registry_; }

 private:
  void shutdown() override { registry_->shutdown(); }

  std::shared_ptr<operation_registry> registry_ = std::make_shared<operation_registry>();
};

template <class Executor>
boost::asio::execution_context& context_of(const Executor& ex) {
  if constexpr (boost::asio::execution::is_executor<Executor>::value)
    return boost::asio::query(ex, boost::asio::execution::context);
  else
    return ex.context();
}

// What a cancelled operation answers beside operation_aborted: nothing was decided for the
// caller, so nothing to admit.
template <class Result>
Result aborted_result(const boost::system::error_code& ec) {
  Result r{};
  if constexpr (requires(Result & x) { x.outcome; }) r.outcome = outcome::backend_error;
  r.error = ec;
  return r;
}

template <class Handler, class... Results>
class operation final : public operation_base {
 public:
  using executor_type = boost::asio::associated_executor_t<Handler>;

  explicit operation(Handler handler, std::shared_ptr<operation_registry> registry)
      : handler_(std::move(handler)),
        work_(boost::asio::get_associated_executor(*handler_)),
        registry_(std::move(registry)) {}

  Handler& handler() noexcept { return *handler_; }

  // From any thread; the first finish (or the context's shutdown) wins, later ones do nothing.
  // True when this one won: the handler has the results.
  bool finish(boost::system::error_code ec, Results... results) {
    return complete(slot_use::clear, ec, std::move(results)...);
  }

  // Cancels on a terminal or partial request. A check cannot honour `total` (no side
  // effects): it may have been decided, and consumed, already.
  struct cancel_handler {
    std::weak_ptr<operation> op;
    void operator()(boost::asio::cancellation_type type) const {
      using boost::asio::cancellation_type;
      if ((type & (cancellation_type::terminal | cancellation_type::partial)) ==
          cancellation_type::none)
        return;
      if (auto o = op.lock()) {
        const boost::system::error_code ec = boost::asio::error::operation_aborted;
        // Called from inside the slot's emit: the handler must stay installed until it returns.
        o->complete(slot_use::keep, ec, aborted_result<Results>(ec)...);
      }
    }
  };

 private:
  // What the completion does with the cancellation slot before running the handler.
  enum class slot_use { clear, keep };

  bool complete(slot_use s, boost::system::error_code ec, Results... results) {
    return registry_->claim(*this, [&] {
      const auto alloc = boost::asio::get_associated_allocator(*handler_);
      boost::asio::post(work_->get_executor(),
                        boost::asio::bind_allocator(
                            alloc, completion{std::move(*handler_), ec,
                                              std::tuple<Results...>(std::move(results)...),
                                              s == slot_use::clear}));
      handler_.reset();
      work_.reset();  // the posted completion counts as work now
    });
  }

  struct completion {
    Handler handler;
    boost::system::error_code ec;
    std::tuple<Results...> results;
    bool clear_slot;

    void operator()() {
      // On the handler's executor, where the caller emits its cancellations: the slot may be
      // reused by the caller's next operation once this handler runs.
      if (clear_slot) {
        auto slot = boost::asio::get_associated_cancellation_slot(handler);
        if (slot.is_connected()) slot.clear();
      }
      std::apply([&](Results&... r) { std::move(handler)(ec, std::move(r)...); }, results);
    }
  };

  void abandon() noexcept override {
    handler_.reset();
    work_.reset();
  }

  std::optional<Handler> handler_;
  std::optional<boost::asio::executor_work_guard<executor_type>> work_;
  std::shared_ptr<operation_registry> registry_;
};

// Registers a new operation owning `handler` and connects its cancellation slot; null when
// the handler's execution context has shut down (the handler is then destroyed unrun).
template <class Handler, class... Results>
std::shared_ptr<operation<Handler, Results...>> start_operation(Handler handler) {
  using op_type = operation<Handler, Results...>;
  auto& context = context_of(boost::asio::get_associated_executor(handler));
  auto& service = boost::asio::use_service<operation_service>(context);
  auto op = std::make_shared<op_type>(std::move(handler), service.registry());
  if (!service.registry()->add(op)) return nullptr;
  auto slot = boost::asio::get_associated_cancellation_slot(op->handler());
  if (slot.is_connected())
    slot.template emplace<typename op_type::cancel_handler>(typename op_type::cancel_handler{op});
  return op;
}

// The operation's own error for a floodgate answer: shutting_down (the backend was destroyed
// with the call pending) is one; every other error is an outcome, kept in the result.
inline boost::system::error_code operation_error(const std::error_code& e) {
  if (e == errc::shutting_down) return boost::system::error_code(e);
  return {};
}

}  // namespace floodgate::detail
