// floodgated's reservations across changes of what is in force (issue 27; docs/algorithms.md,
// "Reservations"): after every change — the rules file or --rules-from version, the Envoy
// config, the run-time overrides — what this process reserved under a policy no longer in force
// goes back to Redis at once (limiter::keep_reservations_of), instead of staying held, and spent
// under the old policy, until swept.
//
//   reservation_keeper keeper(limiter, [&](std::vector<policy>& out) { /* every source */ });
//   keeper.change("rules reload", [&] { store.set(next); });
//
// Every change goes through change(), which puts it in force and then gives back what no source
// names, under one mutex: the policies gathered are then exactly those in force, so a grant
// taken meanwhile under a policy in force (a check of the new rules) is never given back, and no
// change of another source can slip between its install and the keep. A grant of a dropped
// policy is given back once (the library drops it as it sends its units). One taken after the
// keep by a check that began under the old rules stays held until superseded, swept, or the
// next change's keep.
#pragma once

#include <spdlog/spdlog.h>

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

  reservation_keeper(std::shared_ptr<floodgate::limiter> limiter, policies_source in_force)
      : limiter_(std::move(limiter)), in_force_(std::move(in_force)) {}

  // Runs `put` (which puts a change in force, or refuses it), then gives back what is reserved
  // under policies no source names; logs how many grants were dropped (`what`: the change).
  // Serialised with every other change; `put` must not call change().
  void change(std::string_view what, const std::function<void()>& put) {
    std::lock_guard lock(mutex_);
    put();
    std::vector<floodgate::policy> policies;
    in_force_(policies);
    const auto dropped = limiter_->keep_reservations_of(policies);
    if (dropped > 0)
      spdlog::info("msg=\"reservations given back\" after=\"{}\" grants={} reserving_policies={}",
                   what, dropped, policies.size());
  }

 private:
  std::shared_ptr<floodgate::limiter> limiter_;
  policies_source in_force_;
  std::mutex mutex_;
};

}  // namespace floodgate::service
