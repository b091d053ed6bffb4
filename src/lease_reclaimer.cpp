#include "lease_reclaimer.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "floodgate/errors.hpp"

namespace floodgate::detail {

using clock = std::chrono::steady_clock;

struct lease_reclaimer::state {
  struct entry {
    std::string key;
    concurrency_policy policy;
    clock::time_point failed_at;
    clock::time_point give_up_at;  // the lease, had it been taken, has ended by itself
    clock::time_point next;        // the next release, when not in flight
    std::chrono::milliseconds backoff;
    bool in_flight = false;
  };

  state(lease_backend& l, reclaimer_options o) : leases(l), options(o) {}

  lease_backend& leases;
  const reclaimer_options options;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
  std::map<std::string, entry, std::less<>> pending;  // by lease id
  std::uint64_t reclaimed = 0;
  std::uint64_t abandoned = 0;
};

namespace {

using state = lease_reclaimer::state;

void answered(state& s, const std::string& id, const lease_result& r) {
  std::lock_guard lock(s.mutex);
  const auto it = s.pending.find(id);
  if (it == s.pending.end()) return;  // abandoned meanwhile
  auto& e = it->second;
  e.in_flight = false;
  const auto now = clock::now();
  if (!r.error) {
    if (r.done) {
      ++s.reclaimed;
      s.pending.erase(it);
    } else if (now >= e.failed_at + s.options.settle) {
      s.pending.erase(it);  // held nothing: the acquire never ran (or was refused)
    } else {
      e.next = e.failed_at + s.options.settle;  // the acquire may not have run yet
    }
  } else if (!is_backend_error(r.error)) {
    ++s.abandoned;  // the backend refuses this release: asking again cannot help
    s.pending.erase(it);
  } else {
    e.next = now + e.backoff;
    e.backoff = std::min(2 * e.backoff, s.options.max_backoff);
  }
  s.wake.notify_all();
}

struct due_release {
  std::string id;
  std::string key;
  concurrency_policy policy;
};

// The reclaimer's thread: sends each pending id's release when it is due, one at a time per
// id, until told to stop.
void run(const std::shared_ptr<state>& s) {
  std::unique_lock lock(s->mutex);
  while (!s->stop) {
    const auto now = clock::now();
    auto wake_at = clock::time_point::max();
    std::vector<due_release> due;
    for (auto it = s->pending.begin(); it != s->pending.end();) {
      auto& e = it->second;
      if (e.in_flight) {
        ++it;
        continue;
      }
      if (now >= e.give_up_at) {
        ++s->abandoned;
        it = s->pending.erase(it);
        continue;
      }
      if (e.next <= now) {
        e.in_flight = true;
        due.push_back({it->first, e.key, e.policy});
      } else {
        wake_at = std::min(wake_at, e.next);
      }
      ++it;
    }
    if (due.empty()) {
      if (wake_at == clock::time_point::max())
        s->wake.wait(lock);
      else
        s->wake.wait_until(lock, wake_at);
      continue;
    }
    // Unlocked: the memory backend answers inline, and answered() locks.
    lock.unlock();
    for (auto& d : due) {
      try {
        s->leases.async_release(d.key, d.policy, d.id, std::chrono::milliseconds{0},
                                [s, id = d.id](lease_result r) { answered(*s, id, r); });
      } catch (const std::exception&) {  // std::bad_alloc building the call: try again later
        answered(*s, d.id, {false, make_error_code(errc::internal_error)});
      }
    }
    lock.lock();
  }
}

}  // namespace

lease_reclaimer::lease_reclaimer(lease_backend& leases, reclaimer_options options)
    : state_(std::make_shared<state>(leases, options)) {}

lease_reclaimer::~lease_reclaimer() {
  std::thread t;
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
    t = std::move(state_->thread);
  }
  state_->wake.notify_all();
  if (t.joinable()) t.join();
}

void lease_reclaimer::add(std::string_view key, const concurrency_policy& p, std::string_view id) {
  std::lock_guard lock(state_->mutex);
  auto& s = *state_;
  if (s.stop) return;
  if (!s.pending.empty() && s.pending.size() >= s.options.max_pending) {
    // Full: give up the one whose lease ends first, which costs the least.
    const auto first = std::min_element(s.pending.begin(), s.pending.end(), [](auto& a, auto& b) {
      return a.second.give_up_at < b.second.give_up_at;
    });
    s.pending.erase(first);
    ++s.abandoned;
  }
  const auto now = clock::now();
  s.pending.try_emplace(std::string(id),
                        state::entry{std::string(key), p, now, now + p.lease() + s.options.settle,
                                     now, s.options.min_backoff});
  if (!s.thread.joinable()) {
    try {
      s.thread = std::thread([st = state_] { run(st); });
    } catch (const std::system_error&) {  // no thread to be had: the lease ends by itself
      s.pending.erase(std::string(id));
      ++s.abandoned;
      return;
    }
  }
  s.wake.notify_all();
}

semaphore_stats lease_reclaimer::stats() const {
  std::lock_guard lock(state_->mutex);
  return {state_->pending.size(), state_->reclaimed, state_->abandoned};
}

}  // namespace floodgate::detail
