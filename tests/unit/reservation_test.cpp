// Reservations (policy::reserve) on the memory backend: several limiters sharing one backend
// stand for several processes sharing Redis (tests/integration/reservation_test.cpp forks
// real ones). The clock is the test's: windows, reserve_for and spending run on it.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <random>

#include "floodgate/floodgate.hpp"
#include "floodgate/reference.hpp"
#include "reservation_judge.hpp"
#include "test_clock.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<backend> shared_memory(const test_clock& clock) {
  backend_options o;
  o.memory.clock = clock.fn();
  return make_backend("memory://", o);
}

limiter_options on(const test_clock& clock) {
  limiter_options o;
  o.clock = clock.fn();
  return o;
}

// Three processes, checks at random instants over 40 windows of 1 s, the key far above its
// limit in some windows and below it in others: never more than the limit in any window, and
// most checks decided without a backend call.
TEST(reservations, never_admit_more_than_the_limit_in_any_window) {
  test_clock clock;
  auto b = shared_memory(clock);
  std::vector<std::unique_ptr<limiter>> fleet;
  for (int i = 0; i < 3; ++i) fleet.push_back(std::make_unique<limiter>(b, on(clock)));
  const auto p = policy{"hot", algorithm::fixed_window, 50, 1s}.with_reserve(20, 300ms);
  std::mt19937_64 rng(7);
  std::map<std::int64_t, std::int64_t> admitted;  // window index -> admitted
  int checks = 0;
  const std::int64_t start = clock.now();
  while (clock.now() < start + 40'000) {
    const std::int64_t window = (clock.now() - start) / 1000;
    // Even windows flooded (about 200 checks), odd ones at about 30.
    const int gap = window % 2 == 0 ? 5 : 33;
    clock.advance(static_cast<std::int64_t>(rng() % (2 * gap)));
    const auto r = fleet[rng() % fleet.size()]->check("k", p);
    ASSERT_NE(r.outcome, outcome::backend_error);
    ++checks;
    if (r.outcome == outcome::allowed) ++admitted[(clock.now() - start) / 1000];
  }
  std::uint64_t reserved = 0, backend_calls = 0;
  for (const auto& l : fleet) {
    reserved += l->stats().reserved_decisions;
    backend_calls += l->stats().reservations;
  }
  for (const auto& [window, n] : admitted) {
    EXPECT_LE(n, 50) << "window " << window;
    // Flooded windows: what reservations stranded at the window's end is the only shortfall.
    if (window % 2 == 0 && window < 40) {  // (the last check may open window 40)
      EXPECT_GE(n, 30) << "window " << window;
    }
  }
  EXPECT_GT(reserved, backend_calls * 2) << checks << " checks";
}

// sliding_window: every admission, judged by the algorithm's own definition over what was
// actually admitted (this window's admissions before it, plus the last window's weighed by
// how much of it still overlaps), is one the algorithm admits. A unit spent in the window after
// the one it was recorded in would weigh less in the backend's estimate than it does here.
TEST(reservations, sliding_window_admits_only_what_its_estimate_allows) {
  test_clock clock;
  auto b = shared_memory(clock);
  std::vector<std::unique_ptr<limiter>> fleet;
  for (int i = 0; i < 3; ++i) fleet.push_back(std::make_unique<limiter>(b, on(clock)));
  const std::int64_t l = 50, w = 1000;
  const auto p = policy{"hot", algorithm::sliding_window, l, 1s}.with_reserve(20, 500ms);
  std::map<std::int64_t, std::int64_t> admitted;  // window index -> admitted so far
  std::int64_t total = 0;
  const std::int64_t start = clock.now();
  flooded_and_quiet(fleet, p, clock, 11, [&](std::int64_t now) {
    const std::int64_t i = now / w, e = now % w;
    const std::int64_t used = admitted[i] + (admitted[i - 1] * (w - e) + w - 1) / w;
    EXPECT_LE(used + 1, l) << "at " << now - start << " ms: " << admitted[i]
                           << " in this window, " << admitted[i - 1] << " in the last";
    ++admitted[i];
    ++total;
  });
  std::uint64_t reserved = 0;
  for (const auto& f : fleet) reserved += f->stats().reserved_decisions;
  EXPECT_GT(reserved, static_cast<std::uint64_t>(total) / 2) << total << " admitted";
}

// The grant is counted in the window it was taken in: units left at its end are not spent in
// the next one, where the backend's count starts afresh.
TEST(reservations, are_not_spent_past_their_window) {
  test_clock clock;
  auto b = shared_memory(clock);
  limiter a(b, on(clock)), other(b, on(clock));
  const auto p = policy{"w", algorithm::fixed_window, 10, 1s}.with_reserve(10, 1s);
  clock.set(clock.now() - clock.now() % 1000 + 990);  // 10 ms before a window ends
  for (int i = 0; i < 4; ++i) ASSERT_EQ(a.check("k", p).outcome, outcome::allowed);
  clock.advance(10);  // the next window: `a` may hold units of the last one
  int admitted = 0;
  for (int i = 0; i < 30; ++i) {
    admitted += other.check("k", p).outcome == outcome::allowed;
    admitted += a.check("k", p).outcome == outcome::allowed;
  }
  EXPECT_EQ(admitted, 10);
}

// A reservation asks for what this process spent of the last one, so a key checked 10 times a
// second never reserves anything near `reserve` (100), whatever the algorithm.
TEST(reservations, size_follows_the_rate) {
  for (const auto a : {algorithm::fixed_window, algorithm::sliding_window, algorithm::sliding_log,
                       algorithm::token_bucket, algorithm::gcra}) {
    SCOPED_TRACE(to_string(a));
    test_clock clock;
    limiter l(shared_memory(clock), on(clock));
    const auto p = policy{"slow", a, 100'000, 1h}.with_reserve(100, 1s);
    std::uint64_t largest = 0, units_before = 0, before = 0;
    for (int i = 0; i < 600; ++i) {  // a minute at 10 a second
      ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);
      const auto s = l.stats();
      if (s.reservations > before) largest = std::max(largest, s.reserved_units - units_before);
      before = s.reservations;
      units_before = s.reserved_units;
      clock.advance(100);
    }
    const auto s = l.stats();
    ASSERT_GT(s.reservations, 0u);
    EXPECT_LE(largest, 20u) << s.reserved_units << " units in " << s.reservations
                            << " reservations";
    EXPECT_GE(s.reserved_decisions, 500u);
  }
}

// token_bucket, gcra and sliding_log on the memory backend: every admission within the
// derived bound (tests/support/reservation_judge.hpp).
class reservations_bound : public ::testing::TestWithParam<algorithm> {};

TEST_P(reservations_bound, admissions_stay_within_the_derived_bound) {
  test_clock clock;
  backend_options o;
  o.memory.clock = clock.fn();
  auto b = make_backend("memory://", o);
  const auto j = judge_reservation_bound(GetParam(), clock, [&] { return b; });
  EXPECT_EQ(j.beyond_bound, 0) << j.admitted << " admitted";
}

INSTANTIATE_TEST_SUITE_P(reservations, reservations_bound,
                         ::testing::Values(algorithm::sliding_log, algorithm::token_bucket,
                                           algorithm::gcra),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// A grant is sized to what this process spends before its window ends: a key checked once a ms
// does not reserve a second's worth 300 ms before the end, to leave most of it stranded there
// (lost to every process; sliding_window would weigh it on the next window too).
TEST(reservations, a_grant_is_sized_to_the_time_left_in_its_window) {
  for (auto algo : {algorithm::fixed_window, algorithm::sliding_window}) {
    SCOPED_TRACE(to_string(algo));
    test_clock clock;
    limiter l(shared_memory(clock), on(clock));
    const auto p = policy{"steady", algo, 100'000, 1s}.with_reserve(2000, 1s);
    clock.set(clock.now() - clock.now() % 1000 + 300);  // windows start at whole seconds
    for (int i = 0; i < 10'000; ++i) {  // 10 s at one a ms
      ASSERT_EQ(l.check("k", p).outcome, outcome::allowed) << i;
      clock.advance(1);
    }
    const auto s = l.stats();
    const auto stranded = s.reserved_units - s.reserved_decisions;
    EXPECT_LE(stranded, s.reserved_units / 10)
        << s.reserved_units << " units reserved, " << s.reserved_decisions << " spent";
  }
}

// Each answer judged, in time order, by the algorithm's exact definition over what was admitted.
struct exact_tally {
  reference_key exact;
  int checks = 0, wrongly_denied = 0, wrongly_admitted = 0;

  void judge(const check_result& r, std::int64_t now) {
    ++checks;
    const bool admits = exact.decide(now, 1).allowed;
    if (r.outcome != outcome::allowed) {
      wrongly_denied += admits;
      return;
    }
    wrongly_admitted += !admits;
    exact.record(now, 1);
  }
};

// A sliding_log key checked five times past its limit by two processes: a grant's entry counts
// a spend span longer than its units would, and units held by one process deny the other's
// checks, so reserving while the key was at its limit denied what the definition admits: 1,222
// of these 5,000 checks (24 %) before no grant was taken within a window of the key being seen
// at its limit, 40 (0.8 %) after. Judged by the definition over what was admitted.
TEST(reservations, a_log_at_its_limit_is_not_denied_by_units_held_elsewhere) {
  test_clock clock;
  auto b = shared_memory(clock);
  limiter one(b, on(clock)), two(b, on(clock));
  const auto p = policy{"hot", algorithm::sliding_log, 50, 1s}.with_reserve(20, 1s);
  exact_tally t{reference_key(policy{"hot", algorithm::sliding_log, 50, 1s})};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5000; ++i) {  // 20 s at 250 a second
    clock.advance(static_cast<std::int64_t>(rng() % 8));
    const auto r = (rng() % 2 ? one : two).check("k", p);
    ASSERT_NE(r.outcome, outcome::backend_error);
    t.judge(r, clock.now());
  }
  std::cout << "[ stats    ] " << t.wrongly_denied << " wrongly denied of " << t.checks << "\n";
  EXPECT_LE(t.wrongly_denied, t.checks / 100);
  EXPECT_EQ(t.wrongly_admitted, 0);
}

// token_bucket and gcra cannot give units back: one left unspent is lost to every process until
// the bucket is full again, which on a key kept at its limit is never, and from then on the
// definition over what was admitted has a unit more than the backend: every denial of the key
// is one the definition admits. A key checked in pairs (30 ms, then 200 ms apart) had its
// grant doubled by each quick repeat and left one of two units unspent in most pairs (10 here,
// and then 156 of these 234 checks wrongly denied); sized from the rate, nothing is left.
TEST(reservations, a_bucket_grant_strands_no_units_on_a_key_checked_in_pairs) {
  for (const auto a : {algorithm::token_bucket, algorithm::gcra}) {
    SCOPED_TRACE(to_string(a));
    test_clock clock;
    auto b = shared_memory(clock);
    limiter one(b, on(clock)), two(b, on(clock));
    const auto p = policy{"pairs", a, 10, 1s}.with_reserve(2, 1s);  // spend span 100 ms
    exact_tally t{reference_key(policy{"pairs", a, 10, 1s})};
    const auto judge = [&](limiter& l) {
      const auto r = l.check("k", p);
      ASSERT_NE(r.outcome, outcome::backend_error);
      t.judge(r, clock.now());
    };
    // 4 s of pairs, below the limit (about 9 a second)...
    for (int i = 0; i < 17; ++i) {
      judge(one);
      clock.advance(30);
      judge(one);
      clock.advance(200);
    }
    // ... then both flood it at 50 a second, five times its limit, for 4 s.
    for (int i = 0; i < 200; ++i) {
      judge(i % 2 ? one : two);
      clock.advance(20);
    }
    const auto s = one.stats();
    EXPECT_EQ(s.reserved_units, s.reserved_decisions) << "units reserved and never spent";
    EXPECT_LE(t.wrongly_denied, t.checks / 100) << t.checks << " checks";
    EXPECT_EQ(t.wrongly_admitted, 0);
  }
}

// A token_bucket key flooded with large costs: the units asked for in a span (denied ones too:
// 10^13 here) weighed by the time left of the next span (up to 10^6 ms) are past 2^63, and the
// grant's size overflowed there (undefined behaviour, which the sanitizer lane's UBSan stops
// on). Now counted saturating and weighed in 128 bits; the key, at its limit, takes no grant.
TEST(reservations, a_key_flooded_with_large_costs_is_sized_without_overflow) {
  test_clock clock;
  limiter l(shared_memory(clock), on(clock));
  constexpr std::int64_t limit = 100'000'000;  // limit x window in ms: 10^15, the most
  const auto p = policy{"big", algorithm::token_bucket, limit, 10000s}.with_reserve(limit, 1000s);
  clock.advance(1'000'000 - clock.now() % 1'000'000);  // a span's start (W / 10: 10^6 ms)
  for (int i = 0; i < 100'000; ++i) {
    ASSERT_NE(l.check("k", p, limit).outcome, outcome::backend_error);
    if (i % 100 == 99) clock.advance(1);
  }
  clock.advance(1'000'000 - clock.now() % 1'000'000 + 1);  // the next span, all of it ahead
  EXPECT_NE(l.check("k", p, 1).outcome, outcome::backend_error);
  EXPECT_EQ(l.stats().reservations, 0u) << "a key at its limit takes no grant";
}

// A sliding_log grant's entry counts from the end of its spend span: a grant of only the
// request held the key's log W / 10 longer than the check would have. A key checked three
// times in a span (a third of that: one, the request) goes to the backend check by check, and
// its entries age out W after the checks.
TEST(reservations, a_log_checked_now_and_then_is_not_held_a_spend_span_longer) {
  test_clock clock;
  limiter l(shared_memory(clock), on(clock));
  const auto p = policy{"rare", algorithm::sliding_log, 10, 1s}.with_reserve(5, 1s);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);
    clock.advance(1);
  }
  clock.advance(1050);  // the checks aged out, a grant's entry (100 after it) has not
  EXPECT_EQ(l.check("k", p, 0).decision.remaining, 10);
  EXPECT_EQ(l.stats().reservations, 0u);
}

// A nearly exhausted key is not hoarded: a reservation takes at most half of what the key had
// left at the last grant, and once that is less than a request the backend decides one check
// at a time. Two processes taking turns both get a share, and together exactly the limit.
TEST(reservations, the_last_units_are_shared) {
  test_clock clock;
  auto b = shared_memory(clock);
  limiter a(b, on(clock)), other(b, on(clock));
  const auto p = policy{"few", algorithm::fixed_window, 40, 1h}.with_reserve(40, 1h);
  int by_a = 0, by_other = 0;
  for (int i = 0; i < 100; ++i) {
    by_a += a.check("k", p).outcome == outcome::allowed;
    by_other += other.check("k", p).outcome == outcome::allowed;
  }
  EXPECT_EQ(by_a + by_other, 40);
  EXPECT_GE(by_a, 10);
  EXPECT_GE(by_other, 10);
}

// A reload that changes the policy gives back the units reserved under the old one and not
// spent; a reset forgets this process's reservation with the key's state.
TEST(reservations, a_changed_policy_or_a_reset_starts_afresh) {
  test_clock clock;
  limiter l(shared_memory(clock), on(clock));
  const auto p = policy{"r", algorithm::fixed_window, 100, 1h}.with_reserve(50, 1min);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);
  const auto before = l.stats().reservations;
  const auto lowered = policy{"r", algorithm::fixed_window, 9, 1h}.with_reserve(5, 1min);
  const auto r = l.check("k", lowered);
  EXPECT_EQ(l.stats().reservations, before + 1) << "asked the backend under the new policy";
  EXPECT_EQ(r.outcome, outcome::allowed)
      << "the old policy's unspent units came back: the window counts its 8 admissions";
  EXPECT_EQ(l.check("k", lowered).outcome, outcome::over_limit) << "9 admitted: the limit";
  ASSERT_FALSE(l.reset("k", p));
  for (int i = 0; i < 100; ++i) ASSERT_EQ(l.check("k", p).outcome, outcome::allowed) << i;
  EXPECT_EQ(l.check("k", p).outcome, outcome::over_limit);
}

// Units a process reserved and did not spend come back when its grant ends early — superseded
// by the next grant (reserve_for ran out within the window) or the limiter going — so the
// window ends up counting exactly what was admitted. Without the give-back it counts every
// unit reserved.
TEST(reservations, units_not_spent_are_given_back) {
  test_clock clock;
  auto b = shared_memory(clock);
  const auto p = policy{"gb", algorithm::fixed_window, 1000, 1h}.with_reserve(200, 100ms);
  clock.set(clock.now() - clock.now() % 3'600'000 + 10);
  std::uint64_t held = 0;
  {
    limiter a(b, on(clock));
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 40; ++i) ASSERT_EQ(a.check("k", p).outcome, outcome::allowed);
      clock.advance(150);  // past reserve_for: the next check takes a new grant
    }
    const auto s = a.stats();
    held = s.reserved_units - s.reserved_decisions;
    ASSERT_GT(held, 0u) << "units were reserved and not spent";
    EXPECT_GT(s.reserved_units_given_back, 0u) << "superseded grants gave theirs back";
  }  // the rest goes back with the limiter
  limiter plain(b, on(clock));
  const auto r = plain.check("k", policy{"gb", algorithm::fixed_window, 1000, 1h}, 0);
  EXPECT_EQ(r.decision.remaining, 1000 - 120) << held << " units were held at the end";
}

// A give-back names its window: one that arrives after that window ended returns nothing, so
// units of an old window never become capacity in a new one.
TEST(reservations, a_give_back_to_a_past_window_returns_nothing) {
  test_clock clock;
  auto b = shared_memory(clock);
  const auto p = policy{"gb", algorithm::fixed_window, 10, 1s};
  clock.set(clock.now() - clock.now() % 1000 + 900);
  reserve_reply grant;
  b->async_reserve("k", p, 6, [&](reserve_reply r) { grant = r; });
  ASSERT_EQ(grant.granted, 6);
  EXPECT_EQ(grant.spend_within, 100ms);
  clock.advance(100);  // the next window
  b->async_reserve("k", p, 4, [&](reserve_reply r) { grant = r; });
  ASSERT_EQ(grant.granted, 4);
  backend_reply back;
  b->async_give_back("k", p, grant.window - 1, 6, "old", [&](backend_reply r) { back = r; });
  EXPECT_EQ(back.refunded, 0);
  b->async_give_back("k", p, grant.window, 3, "new", [&](backend_reply r) { back = r; });
  EXPECT_EQ(back.refunded, 3);
  b->async_give_back("k", p, grant.window, 3, "new", [&](backend_reply r) { back = r; });
  EXPECT_EQ(back.refunded, 3);
  EXPECT_TRUE(back.replayed) << "twice returned counts once";
  limiter peek(b, on(clock));
  EXPECT_EQ(peek.check("k", p, 0).decision.remaining, 10 - 1);
}

// check_all of several items spends reservations too: a per-user and a global policy, both
// reserving, checked together by three processes, admit exactly the tighter limit, mostly
// without a backend call; a batch whose other item is refused gives its reserved units back to
// their grant (neither lost nor spent twice).
TEST(reservations, check_all_of_several_items_spends_them_all_or_nothing) {
  test_clock clock;
  auto b = shared_memory(clock);
  clock.set(clock.now() - clock.now() % 3'600'000 + 10);
  std::vector<std::unique_ptr<limiter>> fleet;
  for (int i = 0; i < 3; ++i) fleet.push_back(std::make_unique<limiter>(b, on(clock)));
  const auto user = policy{"user", algorithm::fixed_window, 5000, 1h}.with_reserve(100, 1h);
  const auto global = policy{"global", algorithm::sliding_window, 2000, 1h}.with_reserve(100, 1h);
  std::mt19937_64 rng(5);
  int admitted = 0;
  for (int i = 0; i < 4000; ++i) {
    const auto r = fleet[rng() % 3]->check_all({{"u1", &user, 1}, {"all", &global, 1}});
    ASSERT_NE(r.outcome, outcome::backend_error);
    admitted += r.outcome == outcome::allowed;
  }
  EXPECT_EQ(admitted, 2000);
  std::uint64_t from_reserved = 0;
  for (const auto& l : fleet) from_reserved += l->stats().reserved_decisions;
  EXPECT_GT(from_reserved, 1000u) << "most batches answered from reserved units";

  // A reserving item with one that is refused: its units are set back, not spent.
  const auto few = policy{"few", algorithm::fixed_window, 5, 1h};
  const auto many = policy{"many", algorithm::fixed_window, 1000, 1h}.with_reserve(50, 1h);
  {
    limiter a(b, on(clock));
    for (int i = 0; i < 20; ++i) ASSERT_EQ(a.check("m", many).outcome, outcome::allowed);
    int batch_admitted = 0;
    for (int i = 0; i < 30; ++i)
      batch_admitted += a.check_all({{"m", &many, 1}, {"f", &few, 1}}).outcome == outcome::allowed;
    EXPECT_EQ(batch_admitted, 5);
  }  // what it holds goes back
  limiter peek(b, on(clock));
  EXPECT_EQ(
      peek.check("m", policy{"many", algorithm::fixed_window, 1000, 1h}, 0).decision.remaining,
      1000 - 20 - 5);
}

// The table of reservations is bounded (limiter_options::max_reservations): to make room, an
// entry past its grant's end is swept, and what it held of a window still current goes back.
// The key then counts what was admitted; without the give-back, every unit reserved.
TEST(reservations, swept_entries_give_back_what_they_hold) {
  test_clock clock;
  auto b = shared_memory(clock);
  limiter_options o = on(clock);
  o.max_reservations = 16;  // one entry a shard
  limiter l(b, o);
  const auto p = policy{"s", algorithm::fixed_window, 1000, 1h}.with_reserve(100, 1s);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);
  const auto held = l.stats().reserved_units - l.stats().reserved_decisions;
  ASSERT_GT(held, 0u) << "k holds units";
  clock.advance(2000);  // its grant ended; its window did not
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(l.check("other" + std::to_string(i), p).outcome, outcome::allowed);
  limiter peek(b, on(clock));
  EXPECT_EQ(peek.check("k", p, 0).decision.remaining, 1000 - 10) << held << " units held";
  EXPECT_GE(l.stats().reserved_units_given_back, held);
}

// A reload that removes a rule: no later check of it would give back what it holds, so the
// limiter is told which rules remain (keep_reservations_of) and gives back the others' units.
TEST(reservations, a_removed_rule_gives_back_what_it_holds) {
  test_clock clock;
  auto b = shared_memory(clock);
  limiter l(b, on(clock));
  const auto kept = policy{"kept", algorithm::fixed_window, 1000, 1h}.with_reserve(100, 1h);
  const auto gone = policy{"gone", algorithm::fixed_window, 1000, 1h}.with_reserve(100, 1h);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(l.check("k", kept).outcome, outcome::allowed);
    ASSERT_EQ(l.check("k", gone).outcome, outcome::allowed);
  }
  const auto held = l.stats().reserved_units - l.stats().reserved_decisions;
  ASSERT_GT(held, 0u);
  EXPECT_EQ(l.keep_reservations_of(std::span<const policy>(&kept, 1)), 1u);
  limiter peek(b, on(clock));
  EXPECT_EQ(peek.check("k", gone, 0).decision.remaining, 1000 - 10) << "its units came back";
  EXPECT_LT(peek.check("k", kept, 0).decision.remaining, 1000 - 10) << "still held";
  EXPECT_EQ(l.check("k", kept).outcome, outcome::allowed);
  EXPECT_GE(l.stats().reserved_decisions, 11u);
}

// The counters (kept per shard) add up per rule and in total, and a check_all whose reserving
// items hold too few (it goes to the backend and takes reservations of cost 0 for later calls)
// counts no decision as answered from reservations.
TEST(reservations, counters_count_only_what_was_spent) {
  test_clock clock;
  limiter l(shared_memory(clock), on(clock));
  const auto a = policy{"a", algorithm::fixed_window, 1000, 1h}.with_reserve(10, 1h);
  const auto g = policy{"g", algorithm::gcra, 1000, 1h}.with_reserve(10, 1h);
  ASSERT_EQ(l.check_all({{"k", &a, 1}, {"j", &g, 1}}).outcome, outcome::allowed);
  EXPECT_EQ(l.stats().reserved_decisions, 0u) << "the batch went to the backend";
  // One taken for the fixed_window item, for later calls; gcra's are sized from the rate, and
  // one check is no rate.
  EXPECT_EQ(l.stats().reservations, 1u) << "one taken for the windowed item";
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(l.check("k" + std::to_string(i % 3), a).outcome, outcome::allowed);
    ASSERT_EQ(l.check("j", g).outcome, outcome::allowed);
  }
  const auto s = l.stats();
  std::uint64_t taken = 0, units = 0, spent = 0;
  for (const auto& r : l.reservation_stats()) {
    taken += r.reservations;
    units += r.reserved_units;
    spent += r.reserved_decisions;
  }
  EXPECT_EQ(taken, s.reservations);
  EXPECT_EQ(units, s.reserved_units);
  EXPECT_EQ(spent, s.reserved_decisions);
  EXPECT_GE(s.reserved_decisions, 40u);
  EXPECT_LE(s.reserved_decisions, 60u) << "only checks answered from units held";
}

// docs/library.md shows the policy and the check of this test.
TEST(reservations, a_hot_key_is_answered_from_reserved_units) {
  // On the test's clock, at a window's start: on the real one a run in the last second of a
  // minute had its grants cut to what that second would spend (more than 10 reservations).
  test_clock clock;
  floodgate::limiter limiter{shared_memory(clock), on(clock)};
  floodgate::policy hot{"hot", floodgate::algorithm::fixed_window, 100'000, 1min};
  // Up to 100 units at once, each grant spent within 1 s (and within its window).
  hot = hot.with_reserve(100, 1s);
  auto r = limiter.check("tenant-7", hot);  // most answers come from this process's units
  ASSERT_EQ(r.outcome, outcome::allowed);
  for (int i = 0; i < 99; ++i) {
    ASSERT_EQ(limiter.check("tenant-7", hot).outcome, outcome::allowed);
  }
  EXPECT_GE(limiter.stats().reserved_decisions, 90u);
  EXPECT_LE(limiter.stats().reservations, 10u);
}

TEST(reservations, policy_refuses_what_it_cannot_keep) {
  const policy fw{"p", algorithm::fixed_window, 10, 1s};
  EXPECT_THROW(fw.with_reserve(11, 1s), config_error);
  EXPECT_THROW(fw.with_reserve(-1, 1s), config_error);
  EXPECT_THROW(fw.with_reserve(5, 0ms), config_error);
  EXPECT_THROW(fw.with_reserve(5, 2s), config_error);
  // The others: a grant is spent within a tenth of the refill time (B x W / L) or of the
  // window, which must outlive a round trip (at least 10 ms).
  EXPECT_EQ((policy{"p", algorithm::gcra, 10, 1s}.with_reserve(5, 1s).reserve()), 5);
  EXPECT_EQ((policy{"p", algorithm::token_bucket, 10, 1s}.with_reserve(5, 1s).reserve()), 5);
  EXPECT_EQ((policy{"p", algorithm::sliding_log, 10, 1s}.with_reserve(5, 1s).reserve()), 5);
  EXPECT_EQ((policy{"p", algorithm::sliding_log, 10, 100ms}.with_reserve(5, 50ms).reserve()), 5);
  EXPECT_THROW((policy{"p", algorithm::sliding_log, 10, 99ms}.with_reserve(5, 50ms)), config_error);
  EXPECT_EQ((policy{"p", algorithm::gcra, 1000, 1s, 100}.with_reserve(5, 1s).reserve()), 5);
  EXPECT_THROW((policy{"p", algorithm::gcra, 1000, 1s, 99}.with_reserve(5, 1s)), config_error);
  EXPECT_THROW((policy{"p", algorithm::token_bucket, 1000, 1s, 99}.with_reserve(5, 1s)),
               config_error);
  EXPECT_EQ((policy{"p", algorithm::sliding_window, 10, 1s}.with_reserve(5, 1s).reserve()), 5);
  EXPECT_THROW(
      (policy{"p", algorithm::fixed_window, 10, 1s, std::nullopt, failure_mode::local}.with_reserve(
          5, 1s)),
      config_error);
  EXPECT_THROW(fw.with_block_for(1s).with_reserve(5, 1s), config_error);
  EXPECT_THROW(fw.with_reserve(5, 1s).with_block_for(1s), config_error);
  EXPECT_EQ(fw.with_reserve(5, 1s).with_reserve(0, 1s).reserve(), 0);
  EXPECT_EQ(fw.with_reserve(5, 500ms).reserve_for(), 500ms);
}

}  // namespace
}  // namespace floodgate::test
