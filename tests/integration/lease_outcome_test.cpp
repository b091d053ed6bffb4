// An acquire whose outcome is unknown (the backend did not answer in time, or the connection
// was lost mid-call) may still have taken a slot inside Redis, under an id nobody was told.
// The semaphore releases that id in the background once Redis answers again (issue 28, item
// 6): a limit-1 key is free again soon after the outage, not a whole lease later.
#include <gtest/gtest.h>

#include <future>

#include "integration_support.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

// The lease sets under `prefix`, and how many leases they hold.
long long leases_held(const redis_server& redis, const std::string& prefix) {
  long long held = 0;
  for (const auto& k : scan_keys(redis, prefix + "*")) held += redis.command({"ZCARD", k}).integer;
  return held;
}

struct outage {
  const char* name;
  void (*begin)(redis_server&);
  void (*end)(redis_server&);  // may do nothing: CLIENT PAUSE ends by itself
  std::chrono::milliseconds length;
};

constexpr auto paused_for = 300ms;

const outage outages[] = {
    // Redis holds the script until the pause ends, then runs it: the slot is taken after the
    // caller was told 503.
    {"client_pause_write",
     [](redis_server& r) {
       ASSERT_EQ(r.command({"CLIENT", "PAUSE", std::to_string(paused_for.count()), "WRITE"}).str,
                 "OK");
     },
     // A write waits behind the paused script: when it answers, the script has run.
     [](redis_server& r) {
       r.command({"SET", "barrier", "1"});
     },
     paused_for},
    // Stopped: the timed-out acquire waits in the socket and runs at SIGCONT, in whatever order
    // Redis reads its connections, maybe after a release sent later on another connection.
    {"sigstop", [](redis_server& r) { r.pause(); },
     [](redis_server& r) {
       std::this_thread::sleep_for(paused_for);
       r.resume();
     },
     paused_for},
};

void PrintTo(const outage& o, std::ostream* os) {
  *os << o.name;
}

class lease_outcome : public ::testing::TestWithParam<outage> {};

TEST_P(lease_outcome, an_acquire_that_timed_out_gives_its_slot_back_once_redis_answers) {
  const outage& o = GetParam();
  redis_server redis;
  const auto prefix = unique_prefix("orphan");
  // The deadline this is about: far shorter than the outage.
  auto b = make_backend(redis.url(), redis_options_for(prefix, {}, 50ms));
  ASSERT_TRUE(wait_healthy(*b));
  const concurrency_policy one{"jobs", 1, 1h};
  semaphore sem{*b};
  {
    // Warm: the script is loaded and both connections are up.
    auto a = sem.acquire("k", one);
    ASSERT_EQ(a.outcome, outcome::allowed) << a.error.message();
    ASSERT_TRUE(sem.release("k", one, a.lease).done);
  }

  o.begin(redis);
  const auto unknown = sem.acquire("k", one);
  o.end(redis);
  ASSERT_EQ(unknown.outcome, outcome::backend_error);
  EXPECT_TRUE(unknown.lease.empty());

  // Bounded by the outage, the time a "not held" answer needs to be trusted (the semaphore's
  // settle time, 1 s) and the retry backoff's step at that point; 10 s is far above all three,
  // and a slot that never comes back waits the whole hour.
  EXPECT_TRUE(wait_for([&] { return leases_held(redis, prefix) == 0; }, o.length + 10s))
      << "the timed-out acquire still holds the only slot";
  // Acquires with the same 50 ms deadline: one that runs out on a loaded machine (the sanitizer
  // lane's) says nothing of the slot, and its own grant, if Redis ran it late, is given back in
  // the settle time as above; a slot that never comes back is denied until the end.
  acquire_result again;
  EXPECT_TRUE(wait_for(
      [&] {
        again = sem.acquire("k", one);
        return again.outcome == outcome::allowed;
      },
      10s))
      << "the slot never came back: " << static_cast<int>(again.outcome) << " "
      << again.error.message();
  EXPECT_TRUE(wait_for([&] { return sem.stats().unsettled == 0; }, 10s));
}

INSTANTIATE_TEST_SUITE_P(outages, lease_outcome, ::testing::ValuesIn(outages),
                         [](const auto& p) { return std::string(p.param.name); });

// The callback form for a caller that may be gone when the grant comes (an HTTP client that
// left, a cancelled operation): a lease the handler does not take is released, one it takes is
// the caller's.
TEST(lease_outcome_delivery, a_lease_not_taken_is_given_back_and_a_taken_one_kept) {
  redis_server redis;
  const auto prefix = unique_prefix("not_taken");
  auto b = make_backend(redis.url(), redis_options_for(prefix, {}, 2s));
  ASSERT_TRUE(wait_healthy(*b));
  const concurrency_policy one{"jobs", 1, 1h};
  semaphore sem{*b};
  auto acquire = [&](delivery answer) {
    std::promise<acquire_result> got;
    // `answer` by value: once set_value() wakes the caller, this frame may be gone.
    sem.async_acquire_or_give_back("k", one, [&got, answer](acquire_result r) {
      got.set_value(r);
      return answer;
    });
    return got.get_future().get();
  };
  const auto refused = acquire(delivery::not_taken);
  ASSERT_EQ(refused.outcome, outcome::allowed) << refused.error.message();
  // One release call after the grant: 10 s is far above it, far below the hour.
  EXPECT_TRUE(wait_for([&] { return leases_held(redis, prefix) == 0; }, 10s))
      << "a lease nobody took still holds the only slot";
  EXPECT_TRUE(wait_for([&] { return sem.stats().reclaimed == 1; }, 10s));

  const auto taken = acquire(delivery::taken);
  ASSERT_EQ(taken.outcome, outcome::allowed) << taken.error.message();
  EXPECT_EQ(leases_held(redis, prefix), 1);
  EXPECT_EQ(sem.stats().unsettled, 0u) << "a taken lease is not chased";
  EXPECT_TRUE(sem.release("k", one, taken.lease).done) << "the taker holds it";
}

// A semaphore (and then its backend) destroyed while an unknown acquire is still being
// chased: the chase stops, nothing touches the destroyed objects (ASan lane), and the slot
// is left to its lease's end.
TEST(lease_outcome_lifetime, a_semaphore_destroyed_mid_chase_stops_cleanly) {
  redis_server redis;
  const auto prefix = unique_prefix("orphan_dtor");
  auto b = make_backend(redis.url(), redis_options_for(prefix, {}, 50ms));
  ASSERT_TRUE(wait_healthy(*b));
  const concurrency_policy one{"jobs", 1, 2s};
  {
    semaphore sem{*b};
    redis.pause();
    EXPECT_EQ(sem.acquire("k", one).outcome, outcome::backend_error);
    EXPECT_EQ(sem.stats().unsettled, 1u);
  }
  b.reset();
  redis.resume();
  // Nothing was released: the lease (if the acquire ran) ends by itself within its 2 s.
  EXPECT_TRUE(wait_for([&] { return leases_held(redis, prefix) == 0; }, 2s + 5s));
}

}  // namespace
}  // namespace floodgate::test
