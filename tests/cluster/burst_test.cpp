// Same-millisecond bursts on a cluster: forked processes, each with many threads, fire at
// keys on all three masters at the same instant. Every exact algorithm must admit exactly its
// limit per key: each key's scripts run one at a time on its master.
#include <gtest/gtest.h>

#include "cluster_support.hpp"
#include "forked_burst.hpp"

namespace floodgate::test {
namespace {

constexpr int processes = 2;
constexpr int threads_per_process = 32;
constexpr int rounds = 2;           // each thread checks every key this many times
constexpr std::int64_t limit = 50;  // of processes * threads * rounds = 128 calls per key
constexpr std::int64_t fixed_ms = 1'800'000'000'000;

struct counts {
  int admitted[3] = {0, 0, 0};
  int errors = 0;
};

void child(burst_child& me, const std::string& url, const std::string& prefix, algorithm a,
           const std::vector<std::string>& keys, std::chrono::milliseconds block_for = 0ms) {
  backend_options o;
  o.redis.key_prefix = prefix;
  o.redis.test_clock = [] { return std::chrono::milliseconds(fixed_ms); };  // one millisecond
  o.redis.timeout = 5s;
  limiter l{url, o};
  const policy p = policy{"burst", a, limit, 1h}.with_block_for(block_for);
  if (!wait_healthy(l.get_backend())) ::_exit(4);
  std::atomic<bool> go{false};
  std::atomic<int> admitted[3] = {0, 0, 0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_per_process; ++t)
    threads.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < rounds * 3; ++i) {
        const int k = (t + i) % 3;
        const auto r = l.check(keys[static_cast<std::size_t>(k)], p);
        if (r.outcome == outcome::allowed)
          admitted[k].fetch_add(1);
        else if (r.outcome != outcome::over_limit)
          errors.fetch_add(1);
      }
    });
  me.ready_and_wait();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  counts out;
  for (int k = 0; k < 3; ++k) out.admitted[k] = admitted[k].load();
  out.errors = errors.load();
  me.report(out);
}

class cluster_burst : public ::testing::TestWithParam<algorithm> {};

// Forked processes burst on one hot key per master: each key admits exactly `limit`.
void expect_exact_on_every_master(algorithm a, const std::string& name,
                                  std::chrono::milliseconds block_for) {
  auto& c = shared_cluster();
  const auto prefix = unique_prefix(name);
  std::vector<std::string> keys;
  for (int m : c.masters()) keys.push_back(key_on(c, m, "hot"));
  ASSERT_EQ(keys.size(), 3u);
  const auto results = forked_burst<counts>(
      processes, [&](burst_child& me) { child(me, c.url(), prefix, a, keys, block_for); });
  ASSERT_TRUE(results) << "a child failed";
  counts total;
  for (const auto& r : *results) {
    for (int k = 0; k < 3; ++k) total.admitted[k] += r.admitted[k];
    total.errors += r.errors;
  }
  EXPECT_EQ(total.errors, 0);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(total.admitted[k], limit)
        << to_string(a) << " key " << keys[static_cast<std::size_t>(k)];
}

TEST_P(cluster_burst, admits_exactly_the_limit_on_every_master) {
  expect_exact_on_every_master(GetParam(), "burst", std::chrono::milliseconds{0});
}

// With a penalty (the multi_block script, its block key in the state key's slot).
TEST_P(cluster_burst, admits_exactly_the_limit_with_block_for) {
  expect_exact_on_every_master(GetParam(), "burstb", 1h);
}

// Concurrency limits: every process acquires on keys of all three masters and holds what it
// gets (leases of 1 h): exactly `limit` leases per key are granted, and a made-up lease
// frees nothing.
TEST(cluster_lease_burst, grants_exactly_the_limit_on_every_master) {
  auto& c = shared_cluster();
  const auto prefix = unique_prefix("lease");
  std::vector<std::string> keys;
  for (int m : c.masters()) keys.push_back(key_on(c, m, "hot"));
  const auto results = forked_burst<counts>(processes, [&](burst_child& me) {
    backend_options o;
    o.redis.key_prefix = prefix;
    o.redis.timeout = 5s;
    auto b = make_backend(c.url(), o);
    semaphore sem{*b};
    const concurrency_policy p{"jobs", limit, 1h};
    if (!wait_healthy(*b)) ::_exit(4);
    std::atomic<bool> go{false};
    std::atomic<int> granted[3] = {0, 0, 0};
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < threads_per_process; ++t)
      threads.emplace_back([&, t] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (int i = 0; i < rounds * 3; ++i) {
          const int k = (t + i) % 3;
          const auto& key = keys[static_cast<std::size_t>(k)];
          const auto r = sem.acquire(key, p);
          if (r.outcome == outcome::allowed)
            granted[k].fetch_add(1);
          else if (r.outcome != outcome::over_limit)
            errors.fetch_add(1);
          if (sem.release(key, p, "00000000000000000000000000000000").done) errors.fetch_add(1);
        }
      });
    me.ready_and_wait();
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    counts out;
    for (int k = 0; k < 3; ++k) out.admitted[k] = granted[k].load();
    out.errors = errors.load();
    me.report(out);
  });
  ASSERT_TRUE(results) << "a child failed";
  counts total;
  for (const auto& r : *results) {
    for (int k = 0; k < 3; ++k) total.admitted[k] += r.admitted[k];
    total.errors += r.errors;
  }
  EXPECT_EQ(total.errors, 0);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(total.admitted[k], limit) << "key " << keys[static_cast<std::size_t>(k)];
}

INSTANTIATE_TEST_SUITE_P(exact, cluster_burst,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         [](const ::testing::TestParamInfo<algorithm>& param) {
                           return std::string(to_string(param.param));
                         });

}  // namespace
}  // namespace floodgate::test
