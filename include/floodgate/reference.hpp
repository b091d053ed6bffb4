// One key under an algorithm's exact definition, decided at instants the caller gives: the
// step functions both backends decide by, with no backend. For judging recorded decisions
// (floodgate-bench --replay): feed it the admissions a run made, ask what the definition
// answers each decision, and compare.
//
//   floodgate::reference_key k(policy);
//   for (const auto& d : decisions_in_time_order) {
//     if (k.decide(d.ms, d.cost).allowed != d.allowed) ++wrong;
//     if (d.allowed) k.record(d.ms, d.cost);  // the run's own history, right or wrong
//   }
#pragma once

#include <cstdint>
#include <memory>

#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate {

class reference_key {
 public:
  explicit reference_key(const policy& p);
  ~reference_key();
  reference_key(reference_key&&) noexcept;
  reference_key& operator=(reference_key&&) noexcept;

  // What the definition answers a request of `cost` at `now_ms` (ms since the epoch), given
  // what was recorded so far. Changes nothing.
  decision decide(std::int64_t now_ms, std::int64_t cost) const;
  // Records an admission of `cost` at `now_ms`, whether or not decide() admits it: a run's
  // wrongly admitted requests count against what comes after, as they did in the run.
  void record(std::int64_t now_ms, std::int64_t cost);

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace floodgate
