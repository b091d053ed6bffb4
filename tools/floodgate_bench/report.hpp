// The run's outcome for people (a short summary) and for programs (--json: one object).
//
// JSON fields: target, url, mode, algorithm, limit, window_ms, burst_size, cost, processes,
// threads, inflight, connections, keys, zipf, duration_ms | burst, elapsed_s, decisions,
// decisions_per_sec, allowed, denied, errors, over_admitted, accuracy {bound, admitted,
// undetermined, clock_tolerance_ms[, aligned_over_admitted]}, latency_us {p50, p90, p99,
// p999, max, mean, distribution: [[quantile, µs], ...]} (service time: send to answer),
// first_error (only when there were errors); open loop (--rate) adds open_loop {rate, arrivals,
// max_lag_ms, intended, sent, dropped} and corrected_latency_us (as latency_us, from each
// request's intended send time) and traffic {over_limit_share, near_limit_share, keys_over
// [, requested_over_limit_share]}: the shares of requests from keys whose offered load (their
// share of rate x cost per window) is over the limit, and within [limit/2, limit].
// --algorithm concurrency: algorithm "concurrency", lease_ms and hold_ms instead of
// window_ms, burst_size and cost; decisions are acquires (allowed: granted, denied: refused),
// latency_us theirs; over_admitted = max(0, max_held - limit), and leases {limit, granted,
// refused, released, lost, max_held, keys_at_limit, keys_over_limit} replaces accuracy:
// max_held is the most leases of one key held at once as the bench saw them (held_board.hpp).
// --replay adds wrong_decisions {reference: "sliding_log", recorded, judged, unjudged,
// wrongly_admitted, wrongly_denied, wrongly_admitted_share, wrongly_denied_share,
// over_admission {max, mean, key_windows, key_windows_over}} and own_definition {algorithm,
// judged, wrongly_admitted, wrongly_denied, wrongly_admitted_share, wrongly_denied_share,
// bound_extra_burst, beyond_bound}: the same decisions judged by the run's own algorithm, and
// the admissions beyond the bound reservations keep (replay.hpp).
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "accuracy.hpp"
#include "floodgate/policy.hpp"
#include "held_board.hpp"
#include "options.hpp"
#include "replay.hpp"
#include "run_result.hpp"

namespace floodgate::bench {

struct report {
  const bench_options& opts;
  const floodgate::policy& rule;  // the policy every request was checked against
  const run_result& result;
  const accuracy_report& accuracy;
  const std::optional<replay_report>& replayed;  // --replay
  const held_board* held = nullptr;              // --algorithm concurrency
  const replay_report* own = nullptr;            // --replay: by the algorithm's own definition

  double elapsed_s() const;
  double decisions_per_sec() const;
  std::string json() const;
  std::string text() const;

 private:
  std::int64_t max_held() const;
  std::string lease_json() const;
  // The run's shape and counts, shared by both JSON forms: duration_ms | burst, elapsed_s,
  // decisions, decisions_per_sec, allowed, denied, errors.
  void run_fields(std::ostream& o) const;
};

}  // namespace floodgate::bench
