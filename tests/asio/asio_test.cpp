// floodgate/asio.hpp on the memory backend and a real Redis: the handler runs on the caller's
// executor and never inline, every kind of completion token works, cancellation completes with
// operation_aborted (and what the cancelled call did in Redis is what the header says), and
// the limiter or the io_context may go first with operations pending.
#include "floodgate/asio.hpp"

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <tuple>

#include "backend_env.hpp"
#include "integration_support.hpp"
#include "redis_server.hpp"
#include "test_clock.hpp"

namespace floodgate::test {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using error_code = boost::system::error_code;

memory_env memory;
redis_env redis;

// An io_context run by a thread of its own until destroyed.
class io_thread {
 public:
  io_thread() : thread_([this] { io_.run(); }) {}
  ~io_thread() {
    work_.reset();
    thread_.join();
  }
  asio::io_context& io() noexcept { return io_; }
  std::thread::id id() const noexcept { return thread_.get_id(); }

 private:
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  std::thread thread_;
};

template <class T>
T get_within(std::future<T>& f, std::chrono::milliseconds limit = 10s) {
  if (f.wait_for(limit * timing_factor) != std::future_status::ready)
    throw std::runtime_error("no completion within the limit");
  return f.get();
}

// Starts one operation from inside a strand with its handler bound to the strand, and checks
// that the handler runs on that strand's thread only after the initiating call returned.
// `start(token)` initiates; returns the completion's arguments.
template <class... Results, class Start>
std::tuple<error_code, Results...> run_on_strand(io_thread& t, Start start) {
  auto strand = asio::make_strand(t.io());
  std::promise<std::tuple<error_code, Results...>> done;
  asio::post(strand, [&] {
    auto returned = std::make_shared<bool>(false);
    start(asio::bind_executor(strand, [&, returned](error_code ec, Results... r) {
      EXPECT_TRUE(*returned) << "the handler ran inside the initiating call";
      EXPECT_TRUE(strand.running_in_this_thread());
      EXPECT_EQ(std::this_thread::get_id(), t.id());
      done.set_value({ec, std::move(r)...});
    }));
    *returned = true;
  });
  auto f = done.get_future();
  return get_within(f);
}

class asio_test : public ::testing::TestWithParam<backend_env*> {
 protected:
  asio_test() : limiter_(GetParam()->make(clock_.fn()), options()) {}

  limiter_options options() const {
    limiter_options o;
    o.clock = clock_.fn();
    return o;
  }

  test_clock clock_;
  limiter limiter_;
  const std::string key_ = unique_prefix("asio");  // keeps tests apart on the shared Redis
  const policy five_{"asio", algorithm::fixed_window, 5, 1h};
};

TEST_P(asio_test, handlers_run_on_the_callers_strand_and_never_inline) {
  io_thread t;
  // Admitted, denied and invalid checks: the memory backend and invalid requests answer the
  // std::function inline, Redis answers on floodgate's I/O thread; all arrive on the strand.
  for (const std::int64_t cost : {5, 1, -1}) {
    auto [ec, r] = run_on_strand<check_result>(
        t, [&](auto token) { async_check(limiter_, key_, five_, cost, std::move(token)); });
    EXPECT_FALSE(ec);
    EXPECT_EQ(r.outcome, cost == 5   ? outcome::allowed
                         : cost == 1 ? outcome::over_limit
                                     : outcome::invalid_request);
  }
  auto [empty_ec, empty] = run_on_strand<check_result>(
      t, [&](auto token) { async_check(limiter_, "", five_, 1, std::move(token)); });
  EXPECT_FALSE(empty_ec);
  EXPECT_EQ(empty.error, errc::empty_key);

  const policy other{"asio-other", algorithm::token_bucket, 3, 1h};
  auto [all_ec, all] = run_on_strand<multi_check_result>(t, [&](auto token) {
    const std::string second = key_ + "b";  // named: a temporary would end before the call
    const check_item items[] = {{key_, &other, 1}, {second, &other, 1}};
    async_check_all(limiter_, items, std::move(token));
  });
  EXPECT_FALSE(all_ec);
  EXPECT_TRUE(all.allowed());
  auto [none_ec, none] = run_on_strand<multi_check_result>(t, [&](auto token) {
    async_check_all(limiter_, std::span<const check_item>{}, std::move(token));
  });
  EXPECT_FALSE(none_ec);
  EXPECT_EQ(none.error, errc::no_items);

  auto [refund_ec, refunded] = run_on_strand<check_result>(
      t, [&](auto token) { async_refund(limiter_, key_, five_, 2, std::move(token)); });
  EXPECT_FALSE(refund_ec);
  EXPECT_EQ(refunded.decision.remaining, 2);
  auto [reset_ec] =
      run_on_strand<>(t, [&](auto token) { async_reset(limiter_, key_, five_, std::move(token)); });
  EXPECT_FALSE(reset_ec);
  auto [bad_reset_ec] =
      run_on_strand<>(t, [&](auto token) { async_reset(limiter_, "", five_, std::move(token)); });
  EXPECT_EQ(bad_reset_ec, errc::empty_key);  // reset's own error is the operation's

  semaphore sem{limiter_.get_backend()};
  const concurrency_policy one{"asio-lease", 1, 1min};
  auto [acquire_ec, lease] = run_on_strand<acquire_result>(
      t, [&](auto token) { async_acquire(sem, key_, one, std::move(token)); });
  EXPECT_FALSE(acquire_ec);
  ASSERT_EQ(lease.outcome, outcome::allowed);
  auto [renew_ec, renewed] = run_on_strand<lease_result>(
      t, [&](auto token) { async_renew(sem, key_, one, lease.lease, std::move(token)); });
  EXPECT_TRUE(renewed.done);
  auto [release_ec, released] = run_on_strand<lease_result>(
      t, [&](auto token) { async_release(sem, key_, one, lease.lease, std::move(token)); });
  EXPECT_TRUE(released.done);
  auto [bad_ec, bad] = run_on_strand<lease_result>(
      t, [&](auto token) { async_release(sem, key_, one, "", std::move(token)); });
  EXPECT_FALSE(bad_ec);
  EXPECT_EQ(bad.error, errc::invalid_lease);
}

TEST_P(asio_test, every_kind_of_completion_token_works) {
  io_thread t;
  auto coroutine = [&]() -> asio::awaitable<void> {
    // use_awaitable: the result itself.
    const check_result first = co_await async_check(limiter_, key_, five_, 3, asio::use_awaitable);
    EXPECT_EQ(first.outcome, outcome::allowed);
    EXPECT_EQ(first.decision.remaining, 2);
    EXPECT_EQ(std::this_thread::get_id(), t.id());
    // as_tuple: the error code beside it.
    auto [ec, second] =
        co_await async_check(limiter_, key_, five_, 3, asio::as_tuple(asio::use_awaitable));
    EXPECT_FALSE(ec);
    EXPECT_EQ(second.outcome, outcome::over_limit);
    // deferred: nothing happens until launched.
    auto later = async_check(limiter_, key_, five_, 2, asio::deferred);
    EXPECT_EQ(limiter_.check(key_, five_, 0).decision.remaining, 2);
    const check_result third = co_await std::move(later)(asio::use_awaitable);
    EXPECT_EQ(third.outcome, outcome::allowed);
    EXPECT_EQ(third.decision.remaining, 0);
  };
  auto spawned = asio::co_spawn(t.io(), coroutine(), asio::use_future);
  get_within(spawned);

  // use_future, from a thread that runs no io_context at all.
  auto future = async_check(limiter_, key_, five_, 1, asio::use_future);
  EXPECT_EQ(get_within(future).outcome, outcome::over_limit);
  EXPECT_EQ(async_reset(limiter_, key_, five_, asio::use_future).wait_for(10s),
            std::future_status::ready);

  // A plain callback has Asio's system executor: a thread of Asio's pool, so neither the
  // calling thread (inline) nor, on Redis, floodgate's I/O thread.
  std::promise<std::thread::id> io_thread_of_floodgate;
  limiter_.async_check(key_, five_, 0, [&](check_result) {
    io_thread_of_floodgate.set_value(std::this_thread::get_id());
  });
  const auto floodgate_thread = io_thread_of_floodgate.get_future().get();
  std::promise<std::thread::id> ran_on;
  async_check(limiter_, key_, five_, 1, [&](error_code, check_result r) {
    EXPECT_EQ(r.outcome, outcome::allowed);
    ran_on.set_value(std::this_thread::get_id());
  });
  auto ran = ran_on.get_future();
  const auto handler_thread = get_within(ran);
  EXPECT_NE(handler_thread, std::this_thread::get_id());
  EXPECT_NE(handler_thread, floodgate_thread);
}

TEST_P(asio_test, ten_thousand_coroutines_admit_exactly_the_limit) {
  constexpr int coroutines = 10'000;
  const policy shared{"asio-shared", algorithm::sliding_window, 1000, 1h};
  asio::io_context io{1};
  int allowed = 0, over = 0, other = 0;
  for (int i = 0; i < coroutines; ++i)
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto [ec, r] =
              co_await async_check(limiter_, key_, shared, 1, asio::as_tuple(asio::use_awaitable));
          if (ec)
            ++other;
          else if (r.outcome == outcome::allowed)
            ++allowed;
          else if (r.outcome == outcome::over_limit)
            ++over;
          else
            ++other;
        },
        asio::detached);
  io.run();  // returns once every operation has completed: pending ones count as work
  EXPECT_EQ(allowed, 1000);
  EXPECT_EQ(over, coroutines - 1000);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(limiter_.check(key_, shared, 0).decision.remaining, 0);
}

TEST_P(asio_test, cancelling_after_completion_changes_nothing) {
  io_thread t;
  asio::cancellation_signal signal;
  std::promise<int> calls;
  auto strand = asio::make_strand(t.io());
  auto count = std::make_shared<int>(0);
  asio::post(strand, [&] {
    async_check(
        limiter_, key_, five_, 1,
        asio::bind_cancellation_slot(
            signal.slot(), asio::bind_executor(strand, [&, count](error_code ec, check_result r) {
              EXPECT_FALSE(ec);
              EXPECT_EQ(r.outcome, outcome::allowed);
              ++*count;
              // The slot is free again: emitting reaches nobody.
              signal.emit(asio::cancellation_type::terminal);
              asio::post(strand, [&, count] { calls.set_value(*count); });
            })));
  });
  auto f = calls.get_future();
  EXPECT_EQ(get_within(f), 1);
}

// Named by backend: a pointer's value would name the tests differently in every run.
std::string backend_name(const ::testing::TestParamInfo<backend_env*>& info) {
  return info.param->name();
}
INSTANTIATE_TEST_SUITE_P(memory, asio_test, ::testing::Values(&memory), backend_name);
INSTANTIATE_TEST_SUITE_P(redis, asio_test, ::testing::Values(&redis), backend_name);

// Calls that stay pending: a Redis of the test's own, paused (SIGSTOP) on demand, on one
// connection so that replies come back in the order the calls went out.
class asio_pending_test : public ::testing::Test {
 protected:
  static constexpr auto deadline = 20s;  // far beyond every bound below: never what answers

  std::unique_ptr<limiter> make_limiter() {
    auto o = redis_options_for(unique_prefix("asio-pending"), {}, deadline);
    o.redis.connections = 1;
    auto l = std::make_unique<limiter>(redis_.url(), o);
    EXPECT_EQ(l->check("warm-up", open_, 0).outcome,
              outcome::allowed);  // connected, scripts loaded
    return l;
  }

  redis_server redis_;
  const policy open_{"asio-open", algorithm::sliding_log, 10, 1h, std::nullopt, failure_mode::open};
};

TEST_F(asio_pending_test, a_cancelled_check_completes_at_once_and_may_still_count_in_redis) {
  auto l = make_limiter();
  io_thread t;
  redis_.pause();
  asio::cancellation_signal signal;
  auto strand = asio::make_strand(t.io());
  std::promise<error_code> cancelled;
  auto handled = std::make_shared<std::atomic<int>>(0);
  const auto started = std::chrono::steady_clock::now();
  asio::post(strand, [&] {
    async_check(
        *l, "alice", open_, 1,
        asio::bind_cancellation_slot(
            signal.slot(), asio::bind_executor(strand, [&, handled](error_code ec, check_result r) {
              EXPECT_EQ(r.outcome, outcome::backend_error);
              EXPECT_FALSE(r.decision.allowed);  // nothing to admit
              if (handled->fetch_add(1) == 0) cancelled.set_value(ec);
            })));
    // A timer on the same strand cancels it (what cancel_after does).
    auto timer = std::make_shared<asio::steady_timer>(strand, 50ms);
    timer->async_wait([&, timer](error_code) { signal.emit(asio::cancellation_type::terminal); });
  });
  auto f = cancelled.get_future();
  EXPECT_EQ(get_within(f), asio::error::operation_aborted);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s * timing_factor);

  // The check had gone out before the cancel: Redis decides it once it runs again, and the
  // answer is dropped. Replies come back in order, so the next check sees it counted.
  redis_.resume();
  EXPECT_EQ(l->check("alice", open_, 0).decision.remaining, 9);
  std::promise<void> drained;
  asio::post(strand, [&] { drained.set_value(); });
  drained.get_future().wait();
  EXPECT_EQ(handled->load(), 1);
}

// Issue 28, item 6: an acquire cancelled while Redis held it, then granted there. Nobody was
// given the lease, so nobody could release it: before, the only slot stayed taken for the
// whole lease (an hour here). The semaphore releases a lease its caller no longer takes.
TEST_F(asio_pending_test, a_cancelled_acquire_granted_afterwards_gives_its_slot_back) {
  auto l = make_limiter();
  semaphore sem{l->get_backend()};
  const concurrency_policy one{"asio-jobs", 1, 1h};
  {
    auto warm = sem.acquire("k", one);  // the lease script is loaded
    ASSERT_EQ(warm.outcome, outcome::allowed) << warm.error.message();
    ASSERT_TRUE(sem.release("k", one, warm.lease).done);
  }
  io_thread t;
  redis_.pause();
  asio::cancellation_signal signal;
  auto strand = asio::make_strand(t.io());
  std::promise<error_code> cancelled;
  asio::post(strand, [&] {
    async_acquire(
        sem, "k", one,
        asio::bind_cancellation_slot(
            signal.slot(), asio::bind_executor(strand, [&](error_code ec, acquire_result) {
              cancelled.set_value(ec);
            })));
    auto timer = std::make_shared<asio::steady_timer>(strand, 50ms);
    timer->async_wait([&, timer](error_code) { signal.emit(asio::cancellation_type::terminal); });
  });
  auto f = cancelled.get_future();
  ASSERT_EQ(get_within(f), asio::error::operation_aborted);
  redis_.resume();  // the acquire runs now, and is granted

  // The release is one Redis call after the grant: 10 s is far above it, far below the hour.
  const auto until = std::chrono::steady_clock::now() + 10s * timing_factor;
  acquire_result again;
  while ((again = sem.acquire("k", one)).outcome == outcome::over_limit &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(again.outcome, outcome::allowed) << "the cancelled acquire still holds the only slot";
  EXPECT_EQ(sem.stats().reclaimed, 1u);
}

TEST_F(asio_pending_test, racing_a_timer_with_awaitable_operators_cancels_the_check) {
  using namespace asio::experimental::awaitable_operators;
  auto l = make_limiter();
  io_thread t;
  redis_.pause();
  error_code check_error;
  auto check = [&]() -> asio::awaitable<void> {
    auto [ec, r] = co_await async_check(*l, "bob", open_, 1, asio::as_tuple(asio::use_awaitable));
    check_error = ec;
  };
  auto timeout = [&]() -> asio::awaitable<void> {
    asio::steady_timer timer{co_await asio::this_coro::executor, 50ms};
    co_await timer.async_wait(asio::use_awaitable);
  };
  const auto started = std::chrono::steady_clock::now();
  auto race = asio::co_spawn(
      t.io(),
      [&]() -> asio::awaitable<std::size_t> {
        co_return (co_await (check() || timeout())).index();
      },
      asio::use_future);
  EXPECT_EQ(get_within(race), 1u);  // the timer won
  EXPECT_EQ(check_error, asio::error::operation_aborted);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s * timing_factor);
  redis_.resume();
}

TEST_F(asio_pending_test, a_total_cancellation_is_not_honoured) {
  // total means "no side effects": a check that may have been decided cannot promise that.
  auto l = make_limiter();
  io_thread t;
  redis_.pause();
  asio::cancellation_signal signal;
  auto strand = asio::make_strand(t.io());
  std::promise<std::pair<error_code, check_result>> done;
  std::promise<void> emitted;
  asio::post(strand, [&] {
    async_check(*l, "carol", open_, 1,
                asio::bind_cancellation_slot(
                    signal.slot(), asio::bind_executor(strand, [&](error_code ec, check_result r) {
                      done.set_value({ec, r});
                    })));
    signal.emit(asio::cancellation_type::total);
    emitted.set_value();
  });
  emitted.get_future().wait();
  auto f = done.get_future();
  EXPECT_EQ(f.wait_for(100ms), std::future_status::timeout);  // still waiting for Redis
  redis_.resume();
  auto [ec, r] = get_within(f);
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.outcome, outcome::allowed);
}

TEST_F(asio_pending_test, destroying_the_limiter_completes_pending_operations_with_shutting_down) {
  auto l = make_limiter();
  io_thread t;
  redis_.pause();
  constexpr int pending = 50;
  std::atomic<int> shut_down{0}, admitted_open{0}, thrown{0};
  for (int i = 0; i < pending; ++i)
    asio::co_spawn(
        t.io(),
        [&]() -> asio::awaitable<void> {
          auto [ec, r] =
              co_await async_check(*l, "dave", open_, 1, asio::as_tuple(asio::use_awaitable));
          if (ec == errc::shutting_down) ++shut_down;
          // The limiter's own answer rides along: backend_error, the failure mode applied.
          if (r.outcome == outcome::backend_error && r.degraded()) ++admitted_open;
        },
        asio::detached);
  // use_awaitable throws the operation's error.
  auto throwing = asio::co_spawn(
      t.io(),
      [&]() -> asio::awaitable<void> {
        try {
          co_await async_check(*l, "dave", open_, 1, asio::use_awaitable);
        } catch (const boost::system::system_error& e) {
          if (e.code() == errc::shutting_down) ++thrown;
        }
      },
      asio::use_future);
  // The io_context runs them in order: once this runs, every check has been initiated.
  std::promise<void> initiated;
  asio::post(t.io(), [&] { initiated.set_value(); });
  initiated.get_future().wait();

  l.reset();  // the backend's last owner: it answers what it holds with shutting_down
  get_within(throwing);
  std::promise<void> drained;
  asio::post(t.io(), [&] { drained.set_value(); });
  drained.get_future().wait();
  EXPECT_EQ(shut_down.load(), pending);
  EXPECT_EQ(admitted_open.load(), pending);
  EXPECT_EQ(thrown.load(), 1);
  redis_.resume();
}

TEST_F(asio_pending_test,
       destroying_the_io_context_with_operations_pending_destroys_their_handlers) {
  auto l = make_limiter();
  redis_.pause();
  constexpr int pending = 50;
  int frames_destroyed = 0, resumed = 0;
  struct frame_guard {
    int& destroyed;
    ~frame_guard() { ++destroyed; }
  };
  {
    asio::io_context io{1};
    for (int i = 0; i < pending; ++i)
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            frame_guard guard{frames_destroyed};
            co_await async_check(*l, "erin", open_, 1, asio::as_tuple(asio::use_awaitable));
            ++resumed;
          },
          asio::detached);
    bool initiated = false;
    asio::post(io, [&] { initiated = true; });
    while (!initiated) io.run_one();
    EXPECT_EQ(frames_destroyed, 0);
  }  // ~io_context: the coroutines are destroyed unrun, as for Asio's own operations
  EXPECT_EQ(frames_destroyed, pending);
  EXPECT_EQ(resumed, 0);

  // Redis answers the abandoned checks now (in order, before this one): dropped, not run.
  redis_.resume();
  EXPECT_EQ(l->check("erin", open_, 0).decision.remaining, 0);  // 10 of them were admitted
  l.reset();
  EXPECT_EQ(resumed, 0);
}

}  // namespace
}  // namespace floodgate::test
