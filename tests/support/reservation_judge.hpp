// Judges reservations of token_bucket, gcra and sliding_log against their derived bound
// (docs/algorithms.md, "Reservations"): three limiters (processes) on one backend and one test
// clock check one key at random instants over 40 s, flooded and quiet stretches by turns, and
// every admission is judged, in time order, by the algorithm's own definition over what was
// actually admitted (floodgate::reference_key). sliding_log's bound is 0; the buckets' is
// ceil(L x D / W) more than their burst in any interval (D = min(reserve_for, the spend span)),
// judged by the same bucket with that much more burst. Used by the unit (memory) and the
// integration (Redis) tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include "floodgate/floodgate.hpp"
#include "floodgate/reference.hpp"
#include "test_clock.hpp"

namespace floodgate::test {

// Checks one key from the fleet at random instants over 40 s, flooded (a check every 4 ms on
// average) and quiet (every `quiet_ms`) by turns of 1.5 s, so floods start mid-window; calls
// `admitted(now)` for each admission, in time order.
template <class F>
void flooded_and_quiet(std::vector<std::unique_ptr<limiter>>& fleet, const policy& p,
                       test_clock& clock, std::uint64_t seed, F admitted, int quiet_ms = 40) {
  std::mt19937_64 rng(seed);
  const std::int64_t start = clock.now();
  while (clock.now() < start + 40'000) {
    const int gap = (clock.now() - start) / 1500 % 2 == 0 ? 4 : quiet_ms;
    clock.advance(static_cast<std::int64_t>(rng() % (2 * gap)));
    const std::int64_t now = clock.now();
    const auto r = fleet[rng() % fleet.size()]->check("k", p);
    EXPECT_NE(r.outcome, outcome::backend_error);
    if (r.outcome == outcome::allowed) admitted(now);
  }
}

struct bound_judgement {
  std::int64_t admitted = 0;
  std::int64_t from_reservations = 0;
  std::int64_t beyond_definition = 0;  // what the plain definition refuses (the buckets: > 0)
  std::int64_t beyond_bound = 0;       // what the definition with the bound refuses: must be 0
};

// `make` builds one limiter's backend on `clock` (each its own, as processes have).
inline bound_judgement judge_reservation_bound(
    algorithm a, test_clock& clock, const std::function<std::shared_ptr<backend>()>& make) {
  std::vector<std::unique_ptr<limiter>> fleet;
  for (int i = 0; i < 3; ++i) {
    limiter_options o;
    o.clock = clock.fn();
    fleet.push_back(std::make_unique<limiter>(make(), o));
  }
  using namespace std::chrono_literals;
  const std::int64_t l = 50, w = 1000;
  const auto p = policy{"hot", a, l, 1s}.with_reserve(20, 300ms);
  // Spend span: a tenth of the bucket's refill time (B = L here: 100 ms) or of the window.
  const std::int64_t d = std::min<std::int64_t>(300, w / 10);
  const std::int64_t extra = a == algorithm::sliding_log ? 0 : (l * d + w - 1) / w;
  reference_key bounded(a == algorithm::sliding_log ? p : policy{"hot", a, l, 1s, l + extra});
  reference_key plain(policy{"hot", a, l, 1s});
  bound_judgement out;
  // Quiet at 10 a second: the key recovers to more than half its capacity, when these
  // algorithms reserve again (below half they go one check at a time), so every flood starts
  // with units reserved, the bound's worst case.
  flooded_and_quiet(
      fleet, p, clock, static_cast<std::uint64_t>(a) * 7 + 13,
      [&](std::int64_t now) {
        ++out.admitted;
        out.beyond_bound += !bounded.decide(now, 1).allowed;
        out.beyond_definition += !plain.decide(now, 1).allowed;
        bounded.record(now, 1);
        plain.record(now, 1);
      },
      100);
  for (const auto& f : fleet)
    out.from_reservations += static_cast<std::int64_t>(f->stats().reserved_decisions);
  std::cout << "[ stats    ] " << to_string(a) << ": " << out.admitted << " admitted, "
            << out.from_reservations << " from reservations, " << out.beyond_definition
            << " beyond the definition, " << out.beyond_bound << " beyond the bound\n";
  // Flooded half the time: the key was at its limit, and still admitted most of what it allows;
  // a quarter from reservations (each flood's start: the quiet stretches are too slow for a
  // grant sized from the rate, and once the key is more than half used checks go to the
  // backend one at a time). sliding_log's grants stop a quarter of the log earlier: an eighth.
  EXPECT_GT(out.admitted, l * 40 / 2);
  EXPECT_GT(out.from_reservations, out.admitted / (a == algorithm::sliding_log ? 8 : 4));
  return out;
}

}  // namespace floodgate::test
