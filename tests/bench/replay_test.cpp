#include "replay.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

namespace floodgate::bench {
namespace {

constexpr auto no_cutoff = std::numeric_limits<std::int64_t>::max();

decision_record admit(std::int64_t t, std::uint32_t key = 0, std::int64_t cost = 1) {
  return {t, cost, key, 1};
}
decision_record deny(std::int64_t t, std::uint32_t key = 0, std::int64_t cost = 1) {
  return {t, cost, key, 0};
}

TEST(replay, an_exact_sliding_log_stream_has_no_wrong_decision) {
  // Limit 2 per 100 ms: admitted at 0 and 10, denied until 100, when the one at 0 ages out.
  const auto r = replay_sliding_log(
      2, 100, {admit(0), admit(10), deny(50), deny(99), admit(100), deny(105), admit(110)},
      no_cutoff);
  EXPECT_EQ(r.judged, 7u);
  EXPECT_EQ(r.wrongly_admitted, 0u);
  EXPECT_EQ(r.wrongly_denied, 0u);
  EXPECT_EQ(r.max_over_admission, 0);
  EXPECT_EQ(r.key_windows, 2u);  // [0, 100) and [100, 200)
  EXPECT_EQ(r.key_windows_over, 0u);
}

TEST(replay, a_fixed_windows_boundary_burst_is_counted_exactly) {
  // Limit 2 per 100 ms as a fixed window decides it: 2 at 98-99, 2 more at 100-101 (a new
  // window), a 5th at 102 refused. Exactly: 100 and 101 are wrongly admitted (4 in 4 ms), and
  // the denial at 102 is right. Over-admission: window [100, 200) reaches 4 - 2 = 2.
  const auto r = replay_sliding_log(
      2, 100, {admit(98), admit(99), admit(100), admit(101), deny(102)}, no_cutoff);
  EXPECT_EQ(r.wrongly_admitted, 2u);
  EXPECT_EQ(r.wrongly_denied, 0u);
  EXPECT_EQ(r.max_over_admission, 2);
  EXPECT_EQ(r.key_windows, 2u);
  EXPECT_EQ(r.key_windows_over, 1u);
  EXPECT_DOUBLE_EQ(r.mean_over_admission, 1.0);  // (0 + 2) / 2
  EXPECT_DOUBLE_EQ(r.share(r.wrongly_admitted), 2.0 / 5);
}

TEST(replay, a_denial_with_room_left_is_wrongly_denied) {
  // Limit 3 per 100 ms: one admitted at 0, then refused at 20 and 150 with room left; at 99
  // the window still holds 0..99 = 3 admitted, so that refusal is right.
  const auto r = replay_sliding_log(
      3, 100, {admit(0), deny(20), admit(30), admit(40), deny(99), deny(150)}, no_cutoff);
  EXPECT_EQ(r.wrongly_denied, 2u);  // at 20 (1 in the window) and 150 ((50, 150] is empty)
  EXPECT_EQ(r.wrongly_admitted, 0u);
}

TEST(replay, the_window_is_open_at_its_start) {
  // An entry at t counts for (t − W, t] ... i.e. until t + W − 1: at t + W it is gone.
  EXPECT_EQ(replay_sliding_log(1, 100, {admit(0), admit(99)}, no_cutoff).wrongly_admitted, 1u);
  EXPECT_EQ(replay_sliding_log(1, 100, {admit(0), admit(100)}, no_cutoff).wrongly_admitted, 0u);
  EXPECT_EQ(replay_sliding_log(1, 100, {admit(0), deny(100)}, no_cutoff).wrongly_denied, 1u);
}

TEST(replay, costs_count_in_units) {
  // Limit 5: 3 + 3 exceeds; 3 + 2 fits; a denied 3 after 3 is right, a denied 2 is wrong.
  EXPECT_EQ(replay_sliding_log(5, 100, {admit(0, 0, 3), admit(1, 0, 3)}, no_cutoff).wrongly_admitted,
            1u);
  EXPECT_EQ(replay_sliding_log(5, 100, {admit(0, 0, 3), admit(1, 0, 2)}, no_cutoff).wrongly_admitted,
            0u);
  const auto r = replay_sliding_log(5, 100, {admit(0, 0, 3), deny(1, 0, 3), deny(2, 0, 2)},
                                    no_cutoff);
  EXPECT_EQ(r.wrongly_denied, 1u);
  EXPECT_EQ(replay_sliding_log(5, 100, {admit(0, 0, 4), admit(1, 0, 4)}, no_cutoff)
                .max_over_admission,
            3);
}

TEST(replay, keys_are_independent_and_order_in_the_record_does_not_matter) {
  // Key 1's admissions do not fill key 0's window; the record comes in any order.
  const auto r = replay_sliding_log(1, 100, {admit(5, 1), admit(0, 0), deny(50, 1), admit(3, 0)},
                                    no_cutoff);
  EXPECT_EQ(r.wrongly_admitted, 1u);  // key 0 at 3
  EXPECT_EQ(r.wrongly_denied, 0u);
  EXPECT_EQ(r.key_windows, 2u);
}

TEST(replay, within_one_millisecond_admissions_come_first) {
  // Limit 1: admitted and denied at the same ms. Taken as denied first, the denial would look
  // wrong (the window was empty); an exact limiter's pair is consistent admitted first.
  const auto r = replay_sliding_log(1, 100, {deny(7), admit(7)}, no_cutoff);
  EXPECT_EQ(r.wrongly_denied, 0u);
  EXPECT_EQ(r.wrongly_admitted, 0u);
}

TEST(replay, decisions_at_or_after_the_cutoff_are_not_judged) {
  // The record is partial from 100 on: the admission at 150 must not be counted against.
  const auto r = replay_sliding_log(1, 1000, {admit(0), admit(99), admit(100), admit(150)}, 100);
  EXPECT_EQ(r.judged, 2u);
  EXPECT_EQ(r.unjudged, 2u);
  EXPECT_EQ(r.wrongly_admitted, 1u);
}

TEST(replay, an_empty_record_is_clean) {
  const auto r = replay_sliding_log(10, 1000, {}, no_cutoff);
  EXPECT_EQ(r.judged, 0u);
  EXPECT_EQ(r.share(r.wrongly_admitted), 0.0);
  EXPECT_EQ(r.mean_over_admission, 0.0);
}

// By the algorithm's own definition: a fixed window of 2 per 100 ms admits at 99 what sliding_log
// refuses (the window turned at 100, not), and a third admission in one window is wrong.
TEST(replay_own_definition, judges_by_the_runs_own_algorithm) {
  const policy fw{"r", algorithm::fixed_window, 2, std::chrono::milliseconds{100}};
  const std::vector<decision_record> stream = {admit(1000), admit(1099), admit(1100),
                                               admit(1101), deny(1150),  admit(1160)};
  const auto own = replay_own_definition(fw, stream, no_cutoff);
  EXPECT_EQ(own.judged, 6u);
  EXPECT_EQ(own.wrongly_admitted, 1u) << "the third in [1100, 1200)";
  EXPECT_EQ(own.wrongly_denied, 0u);
  EXPECT_GT(replay_sliding_log(2, 100, stream, no_cutoff).wrongly_admitted, 1u)
      << "sliding_log's definition also counts the window boundary";
  // A denial where the window had room is wrong; the next window's first is right.
  const auto denied = replay_own_definition(fw, {admit(1000), deny(1001), deny(1100)}, no_cutoff);
  EXPECT_EQ(denied.wrongly_denied, 2u);
}

// Reservations of token_bucket and gcra may admit ceil(L x D / W) more than the burst
// (docs/algorithms.md): 100 a second, burst 100, D = 100 ms, so 10 more; beyond_bound counts
// only what exceeds even that. The others' bound is their own definition.
TEST(replay_own_definition, counts_what_exceeds_the_reservations_bound) {
  const auto tb = policy{"t", algorithm::token_bucket, 100, std::chrono::seconds{1}}.with_reserve(
      10, std::chrono::seconds{1});
  EXPECT_EQ(reservation_extra_burst(tb), 10);
  EXPECT_EQ(reservation_extra_burst(tb.with_reserve(10, std::chrono::milliseconds{50})), 5);
  EXPECT_EQ(
      reservation_extra_burst(policy{"t", algorithm::token_bucket, 100, std::chrono::seconds{1}}),
      0);
  const auto fw = policy{"f", algorithm::fixed_window, 100, std::chrono::seconds{1}}.with_reserve(
      10, std::chrono::seconds{1});
  EXPECT_EQ(reservation_extra_burst(fw), 0);
  for (const int extra : {10, 11}) {
    std::vector<decision_record> burst(100 + extra, admit(1000));
    const auto r = replay_own_definition_and_bound(tb, in_judging_order(burst, no_cutoff));
    EXPECT_EQ(r.wrongly_admitted, static_cast<std::uint64_t>(extra));
    EXPECT_EQ(r.bound_extra_burst, 10);
    EXPECT_EQ(r.beyond_bound, static_cast<std::uint64_t>(extra - 10));
    const auto f = replay_own_definition_and_bound(fw, in_judging_order(burst, no_cutoff));
    EXPECT_EQ(f.beyond_bound, f.wrongly_admitted) << "fixed_window's bound is its definition";
  }
}

TEST(replay_own_definition, admissions_count_even_when_wrong) {
  // gcra 1 per 100 ms, burst 1: the wrongly admitted one at 10 pushes the next slot to 200, so
  // a denial at 150 is right (as the run's own history had it), and one at 200 is wrong.
  const policy g{"g", algorithm::gcra, 1, std::chrono::milliseconds{100}};
  const auto r =
      replay_own_definition(g, {admit(1000), admit(1010), deny(1150), deny(1200)}, no_cutoff);
  EXPECT_EQ(r.wrongly_admitted, 1u);
  EXPECT_EQ(r.wrongly_denied, 1u) << "only the one at 1200";
}

TEST(replay_own_definition, keys_cutoff_and_same_millisecond_as_sliding_log) {
  const policy fw{"r", algorithm::fixed_window, 1, std::chrono::milliseconds{1000}};
  const auto r = replay_own_definition(
      fw, {deny(7, 0), admit(7, 0), admit(8, 1), admit(2000, 1), admit(2001, 1)}, 2000);
  EXPECT_EQ(r.judged, 3u);
  EXPECT_EQ(r.unjudged, 2u);
  EXPECT_EQ(r.wrongly_denied, 0u) << "admitted first within a millisecond";
  EXPECT_EQ(r.wrongly_admitted, 0u) << "key 1 is its own";
}

}  // namespace
}  // namespace floodgate::bench
