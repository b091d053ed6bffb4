// The wrong-decision rate: every recorded decision replayed through sliding_log's definition
// (and, by replay_own_definition, through the run's own algorithm's)
// (docs/algorithms.md: admit when the cost admitted for the key in (now − W, now] plus this
// cost is at most L) against the run's own admitted history, which is exactly the state an
// exact sliding log would hold. A decision differs when the algorithm admitted what the
// definition refuses (wrongly admitted) or refused what it admits (wrongly denied). Judged
// against the algorithm's own history, an error does not cascade into later decisions.
//
// Decisions within one millisecond of one key are replayed admitted ones first: the record
// has no order inside a millisecond, and this is the order an exact limiter's verdicts are
// consistent with (a denial then sees every admission of its millisecond).
//
// Over-admission per key-window: for each key and aligned window [jW, (j+1)W) in which it was
// admitted, the most its admitted cost in any W-long interval ending in that window exceeds L
// (0 when never); max and mean over all such key-windows.
//
//   auto r = replay_sliding_log(100, 1000, std::move(records), cutoff_ms);
#pragma once

#include <cstdint>
#include <vector>

#include "decision_record.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::bench {

struct replay_report {
  std::uint64_t recorded = 0;  // decisions in the record
  std::uint64_t judged = 0;    // decisions replayed
  std::uint64_t unjudged = 0;  // decisions not replayed: at or after the cutoff (the record is
                               // partial there); main adds those never recorded
  std::uint64_t wrongly_admitted = 0;
  std::uint64_t wrongly_denied = 0;
  std::uint64_t key_windows = 0;       // (key, aligned window) with an admission
  std::uint64_t key_windows_over = 0;  // ... in which the limit was exceeded
  std::int64_t max_over_admission = 0;  // cost units
  double mean_over_admission = 0;       // over all key_windows
  // replay_own_definition with a reserving policy: the extra burst its reservations may admit
  // (reservation_extra_burst) and the decisions admitted beyond even that (0 when the derived
  // bound held).
  std::int64_t bound_extra_burst = 0;
  std::uint64_t beyond_bound = 0;

  double share(std::uint64_t n) const noexcept {
    return judged ? static_cast<double>(n) / static_cast<double>(judged) : 0.0;
  }
};

// The records with time_ms < cutoff_ms (complete below it: see run_result), sorted by key,
// then time, admitted ones first within a millisecond: the order every replay reads. Sorted
// once for all replays of a run.
struct judging_order {
  std::vector<decision_record> records;
  std::uint64_t recorded = 0;  // records before the cutoff dropped the rest
  std::uint64_t unjudged = 0;  // records at or after the cutoff
};
judging_order in_judging_order(std::vector<decision_record> records, std::int64_t cutoff_ms);

replay_report replay_sliding_log(std::int64_t limit, std::int64_t window_ms,
                                 const judging_order& records);
replay_report replay_own_definition(const policy& p, const judging_order& records);

// The burst reservations may admit beyond p's own definition (docs/algorithms.md, "Bound
// (token_bucket, gcra)"): ceil(L x D / W), D = min(reserve_for, S), S a tenth of a full
// bucket's refill time. 0 for the others (they admit no more than without) and without reserve.
std::int64_t reservation_extra_burst(const policy& p);

// replay_own_definition, and for a reserving policy also beyond_bound: the admissions its own
// definition with reservation_extra_burst more burst refuses.
replay_report replay_own_definition_and_bound(const policy& p, const judging_order& records);

// The same, sorting the records first (one replay of a record).
replay_report replay_sliding_log(std::int64_t limit, std::int64_t window_ms,
                                 std::vector<decision_record> records, std::int64_t cutoff_ms);

// The same records judged by the policy's own algorithm (floodgate::reference_key: the step
// functions the backends decide by), fed the run's own admissions in the same order: what an
// approximate algorithm gets wrong by design is not counted here, so what remains is what
// the distributed run added (races, clocks, reservations). Fills recorded, judged, unjudged,
// wrongly_admitted and wrongly_denied; the over-admission fields stay 0 (sliding_log's).
replay_report replay_own_definition(const policy& p, std::vector<decision_record> records,
                                    std::int64_t cutoff_ms);

}  // namespace floodgate::bench
