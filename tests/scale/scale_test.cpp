// A million distinct keys through the Redis backend: what each costs Redis in memory, and that
// expiry gives all of it back. Slow (a few minutes per algorithm: the keys must outlive the fill,
// then expire), so not in the default suite: label scale, built with -DFLOODGATE_SCALE_TESTS=ON
// (docs/testing.md).
//
//   FLOODGATE_SCALE_KEYS=1000000 (default)   distinct keys per algorithm
//   FLOODGATE_SCALE_ALGORITHMS=gcra,sliding_log   (default: all five)
//   FLOODGATE_SCALE_WINDOW=120 (default)     the policy's window in seconds: above the fill time
//
// Prints one line per algorithm, e.g.
//   scale: gcra keys=1000000 used_memory/key=... memory_usage/key=... fill=...s expired_in=...s
// used_memory/key is INFO used_memory's growth over the keys; memory_usage/key is the mean
// MEMORY USAGE (samples 0) of 1,000 random keys, as bench/compare reports memory per key.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "floodgate/floodgate.hpp"
#include "info_text.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::int64_t info_field(const redis_server& redis, const std::string& section,
                        const std::string& field) {
  return info_number(redis.command({"INFO", section}).str, field).value_or(-1);
}

std::int64_t dbsize(const redis_server& redis) {
  return redis.command({"DBSIZE"}).integer;
}

std::size_t keys_wanted() {
  const char* env = std::getenv("FLOODGATE_SCALE_KEYS");
  return env ? std::stoull(env) : 1'000'000;
}

std::chrono::seconds window_wanted() {
  const char* env = std::getenv("FLOODGATE_SCALE_WINDOW");
  return std::chrono::seconds(env ? std::stoll(env) : 120);
}

bool algorithm_wanted(std::string_view name) {
  const char* env = std::getenv("FLOODGATE_SCALE_ALGORITHMS");
  if (!env) return true;
  return ("," + std::string(env) + ",").find("," + std::string(name) + ",") != std::string::npos;
}

// At most `limit` calls in flight: a million at once would only measure the queue's bound.
class in_flight {
 public:
  explicit in_flight(int limit) : limit_(limit) {}
  void acquire() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return n_ < limit_; });
    ++n_;
  }
  void release() {
    std::lock_guard lock(mutex_);
    --n_;
    cv_.notify_all();
  }
  void drain() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return n_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int n_ = 0;
  const int limit_;
};

class scale : public ::testing::TestWithParam<algorithm> {};

TEST_P(scale, a_million_keys_cost_bounded_memory_and_expiry_frees_all_of_it) {
  const std::string name(to_string(GetParam()));
  if (!algorithm_wanted(name)) GTEST_SKIP() << name << " not in FLOODGATE_SCALE_ALGORITHMS";
  const std::size_t keys = keys_wanted();
  redis_server redis({.enable_debug = false, .extra_args = {"--save", "", "--appendonly", "no"}});
  // Every state stops mattering (and expires) one window after its last request
  // (sliding_window: two): longer than the fill, so that all keys are live at once.
  const auto window = window_wanted();
  const policy p("scale", GetParam(), 10, window,
                 takes_burst(GetParam()) ? std::optional<std::int64_t>(10) : std::nullopt);
  // A bucket (token_bucket, gcra) is full again, and its key gone, once what was taken has
  // refilled: take all of it, so that it too matters for a whole window.
  const std::int64_t cost = takes_burst(GetParam()) ? p.capacity() : 1;
  backend_options o;
  o.redis.timeout = 5s;
  limiter l{redis.url(), o};
  ASSERT_EQ(l.check("warm-up", p).outcome, outcome::allowed);
  ASSERT_EQ(redis.command({"FLUSHALL"}).kind, reply::status);  // scripts stay loaded
  const auto before = info_field(redis, "memory", "used_memory");

  const auto fill_start = std::chrono::steady_clock::now();
  in_flight gate(2000);
  std::atomic<std::uint64_t> failures{0};
  for (std::size_t i = 0; i < keys; ++i) {
    gate.acquire();
    l.async_check("user:" + std::to_string(i), p, cost, [&](check_result r) {
      if (r.outcome != outcome::allowed) failures.fetch_add(1);
      gate.release();
    });
  }
  gate.drain();
  const std::chrono::duration<double> fill = std::chrono::steady_clock::now() - fill_start;
  ASSERT_EQ(failures.load(), 0u);
  ASSERT_LT(fill, window) << "the fill outlasted the window: raise FLOODGATE_SCALE_WINDOW";
  const auto live = dbsize(redis);
  const auto peak = info_field(redis, "memory", "used_memory");

  std::int64_t sampled = 0;
  int samples = 0;
  for (; samples < 1000; ++samples) {
    const auto k = redis.command({"RANDOMKEY"});
    if (k.kind != reply::string) break;
    sampled += redis.command({"MEMORY", "USAGE", k.str, "SAMPLES", "0"}).integer;
  }

  // Expiry: Redis's active expiry removes them without being asked (no reads here).
  const auto expire_start = std::chrono::steady_clock::now();
  while (dbsize(redis) > 0 && std::chrono::steady_clock::now() - expire_start < 3 * window + 60s)
    std::this_thread::sleep_for(250ms);
  const std::chrono::duration<double> expired_in = std::chrono::steady_clock::now() - expire_start;
  // used_memory counts allocator bytes: the keyspace's hash tables shrink back in serverCron.
  std::int64_t after = info_field(redis, "memory", "used_memory");
  const std::int64_t slack = std::max<std::int64_t>((peak - before) / 100, 256 * 1024);
  for (int i = 0; i < 40 && after - before > slack; ++i) {
    std::this_thread::sleep_for(250ms);
    after = info_field(redis, "memory", "used_memory");
  }

  std::ostringstream line;
  line << "scale: " << name << " keys=" << keys << " live_keys=" << live
       << " used_memory/key=" << (peak - before) / std::max<std::int64_t>(1, live)
       << " memory_usage/key=" << (samples ? sampled / samples : 0) << " fill=" << fill.count()
       << "s expired_in=" << expired_in.count() << "s used_memory before=" << before
       << " peak=" << peak << " after_expiry=" << after;
  std::cout << line.str() << std::endl;
  RecordProperty("result", line.str());

  EXPECT_EQ(live, static_cast<std::int64_t>(keys)) << "one key per distinct caller key";
  EXPECT_EQ(dbsize(redis), 0) << "keys left after their expiry";
  EXPECT_LE(after - before, slack)
      << "more than 1% of the keys' memory (or 256 KiB) still used after they all expired";
}

INSTANTIATE_TEST_SUITE_P(algorithms, scale,
                         ::testing::Values(algorithm::sliding_log, algorithm::sliding_window,
                                           algorithm::fixed_window, algorithm::token_bucket,
                                           algorithm::gcra),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

}  // namespace
}  // namespace floodgate::test
