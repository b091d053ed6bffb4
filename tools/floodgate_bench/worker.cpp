#include "worker.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <semaphore>
#include <thread>
#include <vector>

#include "arrival_schedule.hpp"
#include "channel.hpp"
#include "clock.hpp"
#include "floodgate/semaphore.hpp"
#include "key_distribution.hpp"
#include "run_result.hpp"
#include "target.hpp"

namespace floodgate::bench {
namespace {

// What the threads of one process share.
struct shared_plan {
  const bench_options& opts;
  std::vector<std::string> keys;
  key_distribution distribution;
  target_maker make_target;
  std::int64_t tolerance_us;
  std::size_t log_share;  // --replay: decisions each thread records at most
  // --algorithm concurrency: the lease policy, the limiter whose backend holds the leases (one
  // per process), and the board of leases held shared with the parent; make_target is unset.
  std::optional<concurrency_policy> leases;
  std::shared_ptr<limiter> lease_limiter;
  held_board* held;
  std::latch ready;
  std::atomic<std::int64_t> start_us{0};  // 0: not yet; < 0: abort
  std::atomic<std::size_t> finished{0};
};

struct thread_state {
  std::mutex mutex;  // answers may arrive on a backend thread
  run_result result;
  std::string setup_error;
  std::atomic<std::uint64_t> answered{0};
};

// intended_us: open loop, when the schedule meant to send it (0: closed loop).
void record(const shared_plan& plan, thread_state& st, std::uint32_t key, std::int64_t cost,
            std::int64_t send_us, answer a, std::int64_t intended_us = 0) {
  const auto receive_us = now_us();
  {
    std::lock_guard lock(st.mutex);
    auto& r = st.result;
    r.finished_us = std::max(r.finished_us, receive_us);
    switch (a.result) {
      case answer::verdict::allowed:
        ++r.allowed;
        if (a.reserved) ++r.reserved;
        r.admissions.push_back({(send_us - plan.tolerance_us) / 1000,
                                (receive_us + plan.tolerance_us) / 1000, cost, key, 0});
        break;
      case answer::verdict::denied:
        ++r.denied;
        break;
      case answer::verdict::error:
        ++r.errors;
        if (r.first_error.empty()) r.first_error = std::move(a.error);
        break;
    }
    if (plan.opts.replay && a.result != answer::verdict::error) {
      // A decision left out (the share is full, or its time unknown) makes the record partial
      // from its ms on; it was decided no earlier than it was sent.
      if (a.decided_ms >= 0 && r.decision_log.size() < plan.log_share)
        r.decision_log.push_back({a.decided_ms, cost, key,
                                  a.result == answer::verdict::allowed ? 1u : 0u});
      else
        r.decision_log_cutoff_ms = std::min(
            r.decision_log_cutoff_ms, a.decided_ms >= 0 ? a.decided_ms : send_us / 1000);
    }
    // Latency of decisions: an error's latency is mostly the deadline, counted apart.
    if (a.result != answer::verdict::error) {
      r.latency_us.record(
          static_cast<std::uint64_t>(std::max<std::int64_t>(0, receive_us - send_us)));
      if (intended_us > 0)
        r.corrected_latency_us.record(
            static_cast<std::uint64_t>(std::max<std::int64_t>(0, receive_us - intended_us)));
    }
  }
  st.answered.fetch_add(1, std::memory_order_relaxed);
}

// Connects and peeks (cost 0 consumes nothing), so the run measures decisions, not connects.
std::unique_ptr<target> set_up(shared_plan& plan, thread_state& st) {
  std::unique_ptr<target> t;
  if (plan.leases) {
    // A release of a lease nobody holds reaches the backend and changes nothing.
    semaphore sem(plan.lease_limiter->get_backend());
    const auto r = sem.release(plan.keys.front(), *plan.leases, "warm-up");
    if (r.error) st.setup_error = "cannot reach the target: " + r.error.message();
    return t;
  }
  try {
    t = plan.make_target();
    std::binary_semaphore warmed{0};
    answer warm;
    t->async_check(plan.keys.front(), 0, [&](answer a) {
      warm = std::move(a);
      warmed.release();
    });
    warmed.acquire();
    if (warm.result == answer::verdict::error)
      st.setup_error = "cannot reach the target: " + warm.error;
  } catch (const std::exception& e) {
    st.setup_error = e.what();
  }
  return t;
}

// Keeps --inflight calls going per thread without waking the thread per call: each slot issues
// its next call from wherever its previous one completed (a backend thread, typically). A call
// that completes on the issuing stack (the memory backend, blocking targets) is followed by a
// loop, not recursion: a slot's phase says who carries on, the caller or the completion.
// A completion carries the loop on for at most `carried_answers` answers that come back on its
// stack (local ones: spent reservations, the deny cache); then it hands the slot back to the
// driver's own thread. Without that bound, a completion on the backend's I/O thread could loop
// on local answers until the run (or the window) ended, and every other reply that thread
// should have read waited behind it, past its deadline.
class driver {
 public:
  driver(shared_plan& plan, thread_state& st, target& t, std::int64_t start_us, std::uint64_t seed)
      : plan_(plan),
        st_(st),
        target_(t),
        stop_us_(start_us + std::chrono::microseconds(plan.opts.duration).count()),
        remaining_(plan.opts.is_burst() ? static_cast<std::int64_t>(*plan.opts.burst) : 0),
        slots_(plan.opts.inflight),
        running_(plan.opts.inflight) {
    for (std::size_t i = 0; i < slots_.size(); ++i) slots_[i].rng.seed(seed + i * 7919);
  }

  // Runs the slots, and the slots handed back, until every slot has finished.
  void run_and_wait() {
    for (auto& s : slots_) run(s, false);
    std::unique_lock lock(mutex_);
    for (;;) {
      handed_cv_.wait(lock, [this] { return !handed_.empty() || running_ == 0; });
      if (handed_.empty()) return;
      slot* s = handed_.back();
      handed_.pop_back();
      lock.unlock();
      run(*s, false);
      lock.lock();
    }
  }

 private:
  enum phase { calling, returned, completed };
  struct slot {
    std::atomic<int> phase{calling};
    std::mt19937_64 rng;  // used by whoever carries the slot on: one thread at a time
  };
  static constexpr int carried_answers = 64;

  bool another() {
    return plan_.opts.is_burst() ? remaining_.fetch_sub(1, std::memory_order_relaxed) > 0
                                 : now_us() < stop_us_;
  }

  // `carried`: called from a completion (a thread not the driver's).
  void run(slot& s, bool carried) {
    const auto cost = plan_.opts.cost;
    for (int calls = 0;; ++calls) {
      if (carried && calls == carried_answers) return hand_back(s);  // before another() spends one
      if (!another()) break;
      const auto key = static_cast<std::uint32_t>(plan_.distribution.pick(s.rng));
      const auto send_us = now_us();
      s.phase.store(calling);
      target_.async_check(plan_.keys[key], cost, [this, &s, key, cost, send_us](answer a) {
        record(plan_, st_, key, cost, send_us, std::move(a));
        // The caller has left: go on here.
        if (s.phase.exchange(completed) == returned) run(s, true);
      });
      if (s.phase.exchange(returned) != completed) return;  // the completion will go on
    }
    std::lock_guard lock(mutex_);
    if (--running_ == 0) handed_cv_.notify_all();
  }

  void hand_back(slot& s) {
    std::lock_guard lock(mutex_);
    handed_.push_back(&s);
    handed_cv_.notify_all();
  }

  shared_plan& plan_;
  thread_state& st_;
  target& target_;
  const std::int64_t stop_us_;
  std::atomic<std::int64_t> remaining_;  // burst mode: calls left to issue, across slots
  std::vector<slot> slots_;
  std::mutex mutex_;
  std::condition_variable handed_cv_;
  std::vector<slot*> handed_;  // slots whose loop the driver's thread carries on
  std::size_t running_;        // slots not finished
};

// --algorithm concurrency, closed loop: acquire a lease on a key, hold it --hold, release it;
// a refused acquire goes on at once. Each thread is one holder at a time (the sync calls); the
// board counts the lease from the acquire's reply to just before the release is sent.
class lease_driver {
 public:
  lease_driver(shared_plan& plan, thread_state& st, std::int64_t start_us, std::uint64_t seed)
      : plan_(plan),
        st_(st),
        sem_(plan.lease_limiter->get_backend()),
        stop_us_(start_us + std::chrono::microseconds(plan.opts.duration).count()),
        remaining_(plan.opts.is_burst() ? static_cast<std::int64_t>(*plan.opts.burst) : 0),
        rng_(seed) {}

  void run() {
    const auto& p = *plan_.leases;
    while (plan_.opts.is_burst() ? remaining_-- > 0 : now_us() < stop_us_) {
      const auto key = plan_.distribution.pick(rng_);
      const auto& name = plan_.keys[key];
      const auto send_us = now_us();
      auto a = sem_.acquire(name, p);
      const auto receive_us = now_us();
      if (a.outcome == outcome::allowed) plan_.held->enter(key);
      {
        std::lock_guard lock(st_.mutex);
        auto& r = st_.result;
        r.finished_us = std::max(r.finished_us, receive_us);
        if (a.outcome == outcome::allowed)
          ++r.allowed;
        else if (a.outcome == outcome::over_limit)
          ++r.denied;
        else
          error(r, a.error);
        if (a.outcome == outcome::allowed || a.outcome == outcome::over_limit)
          r.latency_us.record(
              static_cast<std::uint64_t>(std::max<std::int64_t>(0, receive_us - send_us)));
      }
      st_.answered.fetch_add(1, std::memory_order_relaxed);
      if (a.outcome != outcome::allowed) continue;
      if (plan_.opts.hold.count() > 0) std::this_thread::sleep_for(plan_.opts.hold);
      plan_.held->leave(key);
      const auto released = sem_.release(name, p, a.lease);
      std::lock_guard lock(st_.mutex);
      auto& r = st_.result;
      r.finished_us = std::max(r.finished_us, now_us());
      if (released.error)
        error(r, released.error);
      else if (released.done)
        ++r.released;
      else
        ++r.lost;
    }
  }

 private:
  static void error(run_result& r, std::error_code ec) {
    ++r.errors;
    if (r.first_error.empty()) r.first_error = ec.message();
  }

  shared_plan& plan_;
  thread_state& st_;
  semaphore sem_;
  const std::int64_t stop_us_;
  std::int64_t remaining_;  // burst mode: acquires left to make
  std::mt19937_64 rng_;
};

// Open loop: sends each request at its scheduled instant whether or not earlier answers have
// arrived, up to --inflight at once. A request due while all slots are busy waits for one and
// is sent late; its latency still counts from the intended instant (wrk2's correction for
// coordinated omission), so a stall counts for every request it delays, not once. One that
// has waited --max-lag is dropped and counted: the backlog of a dead target stays bounded.
class open_loop_driver {
 public:
  open_loop_driver(shared_plan& plan, thread_state& st, target& t, std::int64_t start_us,
                   double phase, std::uint64_t seed)
      : plan_(plan),
        st_(st),
        target_(t),
        stop_us_(start_us + std::chrono::microseconds(plan.opts.duration).count()),
        schedule_(start_us, *plan.opts.rate / static_cast<double>(plan.opts.workers()),
                  plan.opts.arrivals, phase, seed ^ 0x5eed),
        rng_(seed),
        slots_(static_cast<std::ptrdiff_t>(plan.opts.inflight)) {}

  void run_and_wait() {
    // Sleeps end up to the timer slack late (50 µs by default): at thousands of requests a
    // second per thread that lateness is most of a gap. 1 µs keeps the schedule.
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    const auto cost = plan_.opts.cost;
    const auto max_lag_us = std::chrono::microseconds(plan_.opts.max_lag).count();
    for (auto intended = schedule_.next(); intended < stop_us_; intended = schedule_.next()) {
      const auto key = static_cast<std::uint32_t>(plan_.distribution.pick(rng_));
      sleep_until_us(intended);
      // Later than max_lag already (this thread ran late: a starved CPU) or by waiting for a
      // slot: dropped. A free slot alone would send a request later than the bound says.
      if (now_us() > intended + max_lag_us ||
          !slots_.try_acquire_until(steady_deadline(intended + max_lag_us))) {
        std::lock_guard lock(st_.mutex);
        ++st_.result.dropped;
        continue;
      }
      const auto send_us = now_us();
      target_.async_check(plan_.keys[key], cost, [this, key, cost, send_us, intended](answer a) {
        record(plan_, st_, key, cost, send_us, std::move(a), intended);
        slots_.release();
      });
    }
    // Every slot back: no completion is still running when the driver goes.
    for (std::size_t i = 0; i < plan_.opts.inflight; ++i) slots_.acquire();
  }

 private:
  // The wall-clock instant `us` on the steady clock the semaphore waits on.
  static std::chrono::steady_clock::time_point steady_deadline(std::int64_t us) {
    return std::chrono::steady_clock::now() + std::chrono::microseconds(us - now_us());
  }

  shared_plan& plan_;
  thread_state& st_;
  target& target_;
  const std::int64_t stop_us_;
  arrival_schedule schedule_;
  std::mt19937_64 rng_;  // key choice: this thread only
  std::counting_semaphore<> slots_;
};

void thread_main(shared_plan& plan, std::size_t process, std::size_t index, thread_state& st) {
  auto t = set_up(plan, st);
  plan.ready.count_down();
  plan.start_us.wait(0);
  const auto start = plan.start_us.load();
  if (start > 0 && st.setup_error.empty()) {
    st.result.started_us = start;
    const auto seed = plan.opts.seed * 1'000'003 + process * 10'007 + index * 101;
    if (plan.leases) {
      lease_driver d(plan, st, start, seed);
      wait_until_us(start);
      d.run();
    } else if (plan.opts.is_open_loop()) {
      // Thread i of n starts i/n of a gap in, so the run's sends interleave evenly.
      const auto n = plan.opts.workers();
      const double phase =
          static_cast<double>(process * plan.opts.threads + index) / static_cast<double>(n);
      open_loop_driver d(plan, st, *t, start, phase, seed);
      d.run_and_wait();
    } else {
      driver d(plan, st, *t, start, seed);
      wait_until_us(start);
      d.run_and_wait();
    }
  }
  t.reset();
  plan.finished.fetch_add(1);
}

}  // namespace

std::string key_name(const std::string& run_id, std::size_t k) {
  return "fgb-" + run_id + "-" + std::to_string(k);
}

int run_worker_process(const bench_options& opts, std::size_t index, const std::string& run_id,
                       int up_fd, int down_fd, held_board* held) {
  const auto p = opts.make_policy();  // outlives the plan: targets refer to it
  std::unique_ptr<shared_plan> plan;
  try {
    std::vector<std::string> keys;
    keys.reserve(opts.keys);
    for (std::size_t k = 0; k < opts.keys; ++k) keys.push_back(key_name(run_id, k));
    if (opts.concurrency && !held) throw std::logic_error("concurrency run without a board");
    std::optional<concurrency_policy> leases;
    std::shared_ptr<limiter> lease_limiter;
    if (opts.concurrency) {
      leases.emplace(opts.make_concurrency_policy());
      lease_limiter = make_bench_limiter(opts);
    }
    plan.reset(new shared_plan{opts, std::move(keys), key_distribution(opts.keys, opts.zipf),
                               opts.concurrency ? target_maker{} : make_target_maker(opts, p),
                               std::chrono::microseconds(opts.clock_tolerance).count(),
                               (opts.replay_max + opts.workers() - 1) / opts.workers(),
                               std::move(leases), std::move(lease_limiter), held,
                               std::latch(static_cast<std::ptrdiff_t>(opts.threads))});
  } catch (const std::exception& e) {
    write_frame(up_fd, frame_type::failure, e.what());
    return 1;
  }

  std::vector<std::unique_ptr<thread_state>> states;
  std::vector<std::jthread> threads;
  for (std::size_t i = 0; i < opts.threads; ++i) {
    states.push_back(std::make_unique<thread_state>());
    threads.emplace_back(thread_main, std::ref(*plan), index, i, std::ref(*states.back()));
  }
  plan->ready.wait();

  auto abort = [&](const std::string& why) {
    plan->start_us.store(-1);
    plan->start_us.notify_all();
    threads.clear();  // joins
    write_frame(up_fd, frame_type::failure, why);
    return 1;
  };
  for (const auto& st : states)
    if (!st->setup_error.empty()) return abort(st->setup_error);

  write_frame(up_fd, frame_type::ready, {});
  const auto start = read_frame(down_fd);
  std::int64_t start_us = 0;
  if (!start || start->type != frame_type::start || start->payload.size() != sizeof start_us)
    return abort("no start instant from the parent");
  std::memcpy(&start_us, start->payload.data(), sizeof start_us);
  plan->start_us.store(start_us);
  plan->start_us.notify_all();

  while (plan->finished.load() < opts.threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::uint64_t answered = 0;
    for (const auto& st : states) answered += st->answered.load(std::memory_order_relaxed);
    write_frame(up_fd, frame_type::progress,
                std::string_view(reinterpret_cast<const char*>(&answered), sizeof answered));
  }
  threads.clear();

  run_result total;
  for (const auto& st : states) total.merge(st->result);
  plan.reset();  // the target (and its connections) go before the result is sent
  return write_frame(up_fd, frame_type::result, total.serialize()) ? 0 : 1;
}

}  // namespace floodgate::bench
