// floodgated's reservations across changes of what is in force (issue 27; docs/algorithms.md,
// "Reservations"): after every change — the rules file or --rules-from version, the Envoy
// config, the run-time overrides — what this process reserved under a policy no longer in force
// goes back to Redis at once (limiter::keep_reservations_of), instead of staying held, and spent
// under the old policy, until swept.
//
//   reservation_keeper keeper(limiter, [&](std::vector<policy>& out) { /* every source */ },
//                             [&] { return snapshots_in_force(); });
//   keeper.change("rules reload", [&] { store.set(next); });
//   keeper.settle();   // now and then, from a thread of its own
//
// Every change goes through change(), which puts it in force and then gives back what no source
// names, under one mutex: the policies gathered are then exactly those in force, so a grant
// taken meanwhile under a policy in force (a check of the new rules) is never given back, and no
// change of another source can slip between its install and the keep. A grant of a dropped
// policy is given back once (the library drops it as it sends its units). A check that began
// under the old rules may still take a grant of an old policy after the keep (its reservation
// was on its way): the old snapshots (`snapshots`) live until such checks have answered, so once
// they are all gone settle() keeps again, and that grant goes back too.
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/limiter.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::service {

class reservation_keeper {
 public:
  // `in_force` appends every reserving policy of every source as it is now (the rules and their
  // overrides, the Envoy config's, the run-time overrides'); called with the mutex held.
  using policies_source = std::function<void(std::vector<floodgate::policy>&)>;

  // `snapshots` gives what in-flight checks hold of the things in force (the rules, the Envoy
  // config, the run-time overrides): a check keeps them until it has answered.
  using snapshots_source = std::function<std::vector<std::shared_ptr<const void>>()>;

  reservation_keeper(std::shared_ptr<floodgate::limiter> limiter, policies_source in_force,
                     snapshots_source snapshots)
      : limiter_(std::move(limiter)),
        in_force_(std::move(in_force)),
        snapshots_(std::move(snapshots)) {}

  // Runs `put` (which puts a change in force, or refuses it), then gives back what is reserved
  // under policies no source names; logs how many grants were dropped (`what`: the change).
  // Serialised with every other change; `put` must not call change().
  void change(std::string_view what, const std::function<void()>& put) {
    std::lock_guard lock(mutex_);
    const auto before = snapshots_();
    put();
    keep(what);
    // The snapshots the change replaced, until the checks holding them have answered.
    for (const auto& s : before)
      if (s && std::none_of(before_.begin(), before_.end(), [&](const auto& w) {
            return !w.owner_before(s) && !s.owner_before(w);
          }))
        before_.push_back(s);
    // Bounded: past it the oldest get no keep of their own (any later change's keep still
    // gives back what they left).
    if (before_.size() > max_waiting) before_.erase(before_.begin(), before_.end() - max_waiting);
    std::erase_if(before_, [this](const auto& w) { return w.expired() || is_current(w); });
  }

  // From a thread of its own, now and then: once no check holds a replaced snapshot any more,
  // keeps again (what a check under the old rules reserved after the change goes back).
  void settle() {
    std::lock_guard lock(mutex_);
    if (before_.empty()) return;
    std::erase_if(before_, [this](const auto& w) { return w.expired() || is_current(w); });
    if (before_.empty()) keep("checks under the old rules answered");
  }

 private:
  void keep(std::string_view what) {
    std::vector<floodgate::policy> policies;
    in_force_(policies);
    const auto dropped = limiter_->keep_reservations_of(policies);
    if (dropped > 0)
      spdlog::info("msg=\"reservations given back\" after=\"{}\" grants={} reserving_policies={}",
                   what, dropped, policies.size());
  }
  // A snapshot still in force (a change that refused, or left that source alone) is not waited
  // for: it is no old one.
  bool is_current(const std::weak_ptr<const void>& w) const {
    for (const auto& s : snapshots_())
      if (!w.owner_before(s) && !s.owner_before(w)) return true;
    return false;
  }

  std::shared_ptr<floodgate::limiter> limiter_;
  policies_source in_force_;
  snapshots_source snapshots_;
  std::mutex mutex_;
  // Replaced snapshots some check may still hold; at most one per source and change in flight,
  // and gone once their checks answered.
  std::vector<std::weak_ptr<const void>> before_;
  static constexpr std::ptrdiff_t max_waiting = 64;
};

}  // namespace floodgate::service
