// Decisions per second and latency of the Redis backend, per algorithm, against a local
// redis-server started by the test fixture (loopback, default options: 2 connections).
//
//   build-redis/bench/floodgate_redis_bench                       # everything
//   build-redis/bench/floodgate_redis_bench --benchmark_filter=sync_latency
//
// sync_latency   one caller, one call at a time: the round trip (p50/p99/p999 counters)
// sync_threads   N callers at once, each one call at a time: multiplexing and pipelining
// async_window   one caller keeping W calls outstanding: the pipeline's throughput
// check_all_3    three policies, all-or-nothing, one caller: the multi script's round trip
//
// Every call is admitted (huge limits, keys spread over 1000 users), so the figures measure
// the path, not denials. Redis and the benchmark share this machine's cores.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench_keys.hpp"
#include "floodgate/floodgate.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using floodgate::algorithm;

floodgate::test::redis_server& redis() {
  static floodgate::test::redis_server server;
  return server;
}

// One limiter per process, connected before timing starts.
floodgate::limiter& shared_limiter() {
  static floodgate::limiter l = [] {
    floodgate::backend_options o;
    o.redis.key_prefix = "bench:";
    o.redis.timeout = 1s;  // saturation tests queue deeply: count every call, do not shed
    floodgate::limiter made{redis().url(), o};
    for (int i = 0; i < 1000 && !made.get_backend().healthy(); ++i)
      std::this_thread::sleep_for(1ms);
    return made;
  }();
  return l;
}

floodgate::policy policy_for(algorithm a) {
  return floodgate::policy{"bench", a, 1'000'000, 1s};  // never the limit at these rates
}

const std::vector<std::string>& keys() {
  return floodgate::bench::user_keys();
}

void report_latency(benchmark::State& state, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<std::size_t>(q * us.size()))];
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["p999_us"] = at(0.999);
}

void sync_latency(benchmark::State& state) {
  const auto p = policy_for(static_cast<algorithm>(state.range(0)));
  auto& l = shared_limiter();
  std::vector<double> us;
  us.reserve(1 << 20);
  std::size_t i = 0, errors = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = l.check(keys()[i++ % keys().size()], p);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
    errors += r.outcome != floodgate::outcome::allowed;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors);
  report_latency(state, us);
  state.SetLabel(std::string(floodgate::to_string(p.algo())));
}

void sync_threads(benchmark::State& state) {
  const auto p = policy_for(static_cast<algorithm>(state.range(0)));
  auto& l = shared_limiter();
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7919, errors = 0;
  for (auto _ : state) {
    const auto r = l.check(keys()[i++ % keys().size()], p);
    errors += r.outcome != floodgate::outcome::allowed;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] =
      benchmark::Counter(static_cast<double>(errors), benchmark::Counter::kAvgThreads);
  state.SetLabel(std::string(floodgate::to_string(p.algo())));
}

// Keeps `window` calls outstanding: each completion issues the next until the iterations run
// out. Counts one decision per iteration.
void async_window(benchmark::State& state) {
  const auto p = policy_for(static_cast<algorithm>(state.range(0)));
  const auto window = static_cast<std::int64_t>(state.range(1));
  auto& l = shared_limiter();
  for (auto _ : state) {
    constexpr std::int64_t batch = 20'000;
    std::atomic<std::int64_t> issued{0}, done{0}, errors{0};
    std::mutex m;
    std::condition_variable cv;
    std::function<void()> issue = [&] {
      const auto n = issued.fetch_add(1);
      if (n >= batch) return;
      l.async_check(keys()[static_cast<std::size_t>(n) % keys().size()], p, 1,
                    [&](floodgate::check_result r) {
                      if (r.outcome != floodgate::outcome::allowed) errors.fetch_add(1);
                      if (done.fetch_add(1) + 1 == batch) {
                        std::lock_guard lock(m);
                        cv.notify_all();
                      }
                      issue();
                    });
    };
    for (std::int64_t w = 0; w < window; ++w) issue();
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done.load() == batch; });
    state.counters["errors"] += static_cast<double>(errors.load());
  }
  state.SetItemsProcessed(state.iterations() * 20'000);
  state.SetLabel(std::string(floodgate::to_string(p.algo())) + " window " + std::to_string(window));
}

void check_all_3(benchmark::State& state) {
  static const floodgate::policy user{"user", algorithm::gcra, 1'000'000, 1s};
  static const floodgate::policy ip{"ip", algorithm::token_bucket, 1'000'000, 1s};
  static const floodgate::policy global{"global", algorithm::fixed_window, 1'000'000'000, 1s};
  auto& l = shared_limiter();
  std::vector<double> us;
  us.reserve(1 << 20);
  std::size_t i = 0, errors = 0;
  for (auto _ : state) {
    const auto& k = keys()[i++ % keys().size()];
    const auto start = std::chrono::steady_clock::now();
    const auto r = l.check_all({{k, &user, 1}, {k, &ip, 1}, {"all", &global, 1}});
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
    errors += r.outcome != floodgate::outcome::allowed;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["errors"] = static_cast<double>(errors);
  report_latency(state, us);
}

void algorithms(benchmark::internal::Benchmark* b) {
  for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                 algorithm::token_bucket, algorithm::gcra})
    b->Arg(static_cast<int>(a));
}

BENCHMARK(sync_latency)->Apply(algorithms)->UseRealTime();
BENCHMARK(sync_threads)->Apply(algorithms)->Threads(16)->Threads(64)->UseRealTime();
BENCHMARK(async_window)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                     algorithm::token_bucket, algorithm::gcra})
        b->Args({static_cast<int>(a), 256});
      b->Args({static_cast<int>(algorithm::gcra), 16});
      b->Args({static_cast<int>(algorithm::gcra), 1024});
    })
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(check_all_3)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
