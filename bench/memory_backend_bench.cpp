// The in-process path: limiter + memory backend, no network. What is measured is floodgate's
// own cost per decision (validation, the failure-mode bookkeeping, the step function, a shard
// lock), which is also the client-side overhead every Redis decision carries.
//
//   build/bench/floodgate_memory_bench
//   build/bench/floodgate_memory_bench --benchmark_filter=check/gcra
//
// check        one caller: limiter.check() per decision, keys spread over 1000 users
// check_all_1  check_all of one item, as floodgated checks a one-rule request
// check_all_3  three policies of one user, all-or-nothing
//
// Every call is admitted (huge limits), so the figures measure the path, not denials.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_keys.hpp"
#include "floodgate/floodgate.hpp"

namespace {

using namespace std::chrono_literals;
using floodgate::algorithm;

const std::vector<std::string>& keys() {
  return floodgate::bench::user_keys();
}

void check(benchmark::State& state) {
  const auto algo = static_cast<algorithm>(state.range(0));
  floodgate::limiter limiter{"memory://"};
  const floodgate::policy p{"bench", algo, 1'000'000'000, 1s};
  std::size_t i = 0;
  for (auto _ : state) {
    auto r = limiter.check(keys()[i++ % keys().size()], p);
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(std::string(floodgate::to_string(algo)));
}

void check_all_1(benchmark::State& state) {
  floodgate::limiter limiter{"memory://"};
  const floodgate::policy p{"bench", algorithm::gcra, 1'000'000'000, 1s};
  std::size_t i = 0;
  for (auto _ : state) {
    auto r = limiter.check_all({{keys()[i++ % keys().size()], &p, 1}});
    benchmark::DoNotOptimize(r);
  }
}

void check_all_3(benchmark::State& state) {
  floodgate::limiter limiter{"memory://"};
  const floodgate::policy a{"a", algorithm::gcra, 1'000'000'000, 1s};
  const floodgate::policy b{"b", algorithm::fixed_window, 1'000'000'000, 1s};
  const floodgate::policy c{"c", algorithm::token_bucket, 1'000'000'000, 1s};
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& key = keys()[i++ % keys().size()];
    auto r = limiter.check_all({{key, &a, 1}, {key, &b, 1}, {key, &c, 1}});
    benchmark::DoNotOptimize(r);
  }
}

BENCHMARK(check)->DenseRange(0, 4);
BENCHMARK(check_all_1);
BENCHMARK(check_all_3);

}  // namespace

BENCHMARK_MAIN();
