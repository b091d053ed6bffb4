// Reservations (policy::reserve) on Redis Cluster and through Sentinel: a reservation lives
// on its key's node (the reserve and give-back scripts run there, the give-back's marker in
// the key's hash slot). Forked processes reserving and spending hot keys at once admit exactly
// each key's limit per window, and units a process held come back when it goes.
#include <gtest/gtest.h>

#include "cluster_support.hpp"
#include "forked_burst.hpp"
#include "pacer.hpp"
#include "redis_sentinel.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

constexpr int processes = 2;
constexpr int threads_per_process = 4;
constexpr std::int64_t limit = 400;
constexpr std::int64_t fixed_ms = 1'800'000'000'000 - 1'800'000'000'000 % 3'600'000;

struct counts {
  int admitted[3] = {0, 0, 0};
  int from_reservations = 0;
  int errors = 0;
};

backend_options options_for(const std::string& prefix) {
  backend_options o;
  o.redis.key_prefix = prefix;
  o.redis.test_clock = [] { return std::chrono::milliseconds(fixed_ms); };  // one window
  o.redis.timeout = 5s;
  return o;
}

policy reserving() {
  return policy{"hot", algorithm::fixed_window, limit, 1h}.with_reserve(40, 1h);
}

// Each thread checks every key until each has been denied 30 times in a row: a process is
// denied only when it holds no unit of that key, so at the end none is stranded.
void child(burst_child& me, const std::string& url, const std::string& prefix,
           const std::vector<std::string>& keys) {
  limiter l{url, options_for(prefix)};
  if (!wait_healthy(l.get_backend())) ::_exit(4);
  const policy p = reserving();
  std::atomic<int> admitted[3] = {0, 0, 0};
  std::atomic<int> errors{0};
  me.ready_and_wait();
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_per_process; ++t)
    threads.emplace_back([&] {
      pacer pace{2000};
      int denied[3] = {0, 0, 0};
      for (;;) {
        bool done = true;
        for (std::size_t k = 0; k < keys.size(); ++k) {
          if (denied[k] >= 30) continue;
          done = false;
          pace();
          const auto r = l.check(keys[k], p);
          if (r.outcome == outcome::allowed) {
            admitted[k].fetch_add(1);
            denied[k] = 0;
          } else {
            if (r.outcome != outcome::over_limit) errors.fetch_add(1);
            ++denied[k];
          }
        }
        if (done) break;
      }
    });
  for (auto& t : threads) t.join();
  counts out;
  for (std::size_t k = 0; k < keys.size(); ++k) out.admitted[k] = admitted[k].load();
  out.from_reservations = static_cast<int>(l.stats().reserved_decisions);
  out.errors = errors.load();
  me.report(out);
}

void expect_exact(const std::string& url, const std::string& prefix,
                  const std::vector<std::string>& keys) {
  const auto results =
      forked_burst<counts>(processes, [&](burst_child& me) { child(me, url, prefix, keys); });
  ASSERT_TRUE(results) << "a child failed";
  counts sum;
  for (const auto& r : *results) {
    for (std::size_t k = 0; k < keys.size(); ++k) sum.admitted[k] += r.admitted[k];
    sum.from_reservations += r.from_reservations;
    sum.errors += r.errors;
  }
  EXPECT_EQ(sum.errors, 0);
  for (std::size_t k = 0; k < keys.size(); ++k) EXPECT_EQ(sum.admitted[k], limit) << keys[k];
  EXPECT_GT(sum.from_reservations, static_cast<int>(limit * keys.size() / 2));
}

// A limiter that reserved on each key and spent part goes: the rest comes back to each key's
// node, so each key counts exactly what was admitted.
void expect_given_back(const std::string& url, const std::string& prefix,
                       const std::vector<std::string>& keys) {
  {
    limiter l{url, options_for(prefix)};
    ASSERT_TRUE(wait_healthy(l.get_backend()));
    for (const auto& k : keys)
      for (int i = 0; i < 20; ++i) ASSERT_EQ(l.check(k, reserving()).outcome, outcome::allowed);
    ASSERT_GT(l.stats().reserved_units, l.stats().reserved_decisions) << "units were held";
  }
  // The destructor waits for the give-backs' answers at most give_back_wait_ms; a loaded
  // machine can answer later, and Redis applies them then: wait for that as long as a call may
  // take (the options' timeout), no longer.
  limiter peek{url, options_for(prefix)};
  for (const auto& k : keys) {
    std::int64_t remaining = -1;
    const bool whole = wait_for(
        [&] {
          const auto r = peek.check(k, policy{"hot", algorithm::fixed_window, limit, 1h}, 0);
          if (r.outcome == outcome::allowed) remaining = r.decision.remaining;
          return remaining == limit - 20;
        },
        options_for(prefix).redis.timeout);
    EXPECT_TRUE(whole) << k << ": remaining " << remaining << ", not " << limit - 20;
  }
}

TEST(cluster_reservations, forked_processes_admit_exactly_the_limit_on_every_master) {
  auto& c = shared_cluster();
  std::vector<std::string> keys;
  for (int m : c.masters()) keys.push_back(key_on(c, m, "hot"));
  ASSERT_EQ(keys.size(), 3u);
  expect_exact(c.url(), unique_prefix("reserve-burst"), keys);
  expect_given_back(c.url(), unique_prefix("reserve-back"), keys);
}

TEST(sentinel_reservations, forked_processes_admit_exactly_the_limit) {
  redis_sentinel s;
  expect_exact(s.url(), unique_prefix("reserve-sentinel"), {"hot"});
  expect_given_back(s.url(), unique_prefix("reserve-sentinel-back"), {"hot"});
}

}  // namespace
}  // namespace floodgate::test
