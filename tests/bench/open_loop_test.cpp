// floodgate-bench's open loop end to end: requests go out on schedule, and a stall of the
// target shows in the latency measured from the intended send time, not in the service time.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "bench_process.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

json::object parse_report(const bench_run& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  try {
    auto v = json::parse(r.out);
    if (v.is_object()) return v.as_object();
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  ADD_FAILURE() << "not one JSON object: " << r.out;
  return {};
}

std::int64_t at(const json::object& o, std::string_view a, std::string_view b = {}) {
  const json::value* v = o.if_contains(a);
  if (v && !b.empty()) v = v->is_object() ? v->as_object().if_contains(b) : nullptr;
  if (!v || !v->is_number()) {
    ADD_FAILURE() << "no number at " << a << " " << b << " in " << json::serialize(o);
    return -1;
  }
  return v->to_number<std::int64_t>();
}

TEST(bench_open_loop, sends_the_scheduled_number_of_requests) {
  // 2 threads at 200/s each for 500 ms, constant: thread i sends at i/2 of a 5 ms gap plus
  // k × 5 ms, k = 0..99 (the 100th would be at 500 ms or later): exactly 200.
  const auto o = parse_report(run_bench({"--redis", "memory://", "--rate", "400", "--duration",
                                         "500ms", "--threads", "2", "--keys", "10", "--json"}));
  EXPECT_EQ(at(o, "decisions"), 200);
  EXPECT_EQ(at(o, "open_loop", "intended"), 200);
  EXPECT_EQ(at(o, "open_loop", "dropped"), 0);
  // Corrected latency includes the service time, so it is never below it.
  EXPECT_GE(at(o, "corrected_latency_us", "max"), at(o, "latency_us", "max"));
  EXPECT_GE(at(o, "corrected_latency_us", "p50"), at(o, "latency_us", "p50"));
}

TEST(bench_open_loop, poisson_arrivals_average_the_rate) {
  // 2000/s for 1 s: a Poisson count of mean 2000 (sd 45); ±300 is more than 6 sd.
  const auto o = parse_report(run_bench({"--redis", "memory://", "--rate", "2000", "--arrivals",
                                         "poisson", "--duration", "1s", "--threads", "2",
                                         "--json"}));
  EXPECT_NEAR(static_cast<double>(at(o, "decisions")), 2000.0, 300.0);
  EXPECT_EQ(at(o, "errors"), 0);
}

TEST(bench_open_loop, closed_loop_reports_have_no_open_loop_fields) {
  const auto o = parse_report(
      run_bench({"--redis", "memory://", "--duration", "200ms", "--threads", "1", "--json"}));
  EXPECT_FALSE(o.contains("open_loop"));
  EXPECT_FALSE(o.contains("corrected_latency_us"));
  EXPECT_TRUE(o.contains("latency_us"));
}

TEST(bench_open_loop, over_limit_share_derives_the_limit_and_reports_the_shape) {
  // 1000 keys, Zipf 1.0, 2000/s over a 1 s window: the hottest key offers 2000 / H(1000) = 267
  // per window. Asking 30 % over puts the top few keys over the derived limit.
  const auto o = parse_report(run_bench({"--redis", "memory://", "--rate", "2000", "--keys",
                                         "1000", "--zipf", "1.0", "--over-limit-share", "0.3",
                                         "--duration", "500ms", "--threads", "2", "--json"}));
  const auto* traffic = o.if_contains("traffic");
  ASSERT_TRUE(traffic && traffic->is_object()) << json::serialize(o);
  const double share = traffic->as_object().at("over_limit_share").to_number<double>();
  EXPECT_NEAR(share, 0.3, 0.05);  // the top-m shares step by under 0.05 here
  EXPECT_GE(at(o, "traffic", "keys_over"), 2);
  EXPECT_LT(at(o, "limit"), 267);
  EXPECT_GT(at(o, "denied"), 0) << "the keys over their limit are refused some";
  EXPECT_GT(at(o, "allowed"), at(o, "denied"));
}

TEST(bench_open_loop, over_limit_share_needs_an_open_loop_and_no_limit) {
  EXPECT_EQ(run_bench({"--redis", "memory://", "--keys", "10", "--over-limit-share", "0.1"})
                .exit_code,
            2);
  EXPECT_EQ(run_bench({"--redis", "memory://", "--rate", "10", "--keys", "10", "--limit", "5",
                       "--over-limit-share", "0.1"})
                .exit_code,
            2);
}

// Runs the bench at 500/s for 3 s on Redis, 1 thread with 4 calls in flight, and stalls Redis
// for 200 ms (DEBUG SLEEP) about 1 s into the run.
json::object run_with_a_stall(redis_server& redis, std::vector<std::string> extra) {
  std::vector<std::string> args{"--redis",  redis.url(), "--rate",  "500",     "--duration",
                                "3s",       "--threads", "1",       "--inflight", "4",
                                "--keys",   "100",       "--limit", "1000000", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto bench = std::async(std::launch::async, [args] { return run_bench(args, 60); });
  // The run has started once its first check wrote a key (the warm-up peeks write nothing).
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (redis.command({"DBSIZE"}).integer == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(redis.command({"DEBUG", "SLEEP", "0.2"}).str, "OK");
  return parse_report(bench.get());
}

TEST(bench_open_loop, a_stall_shows_in_the_corrected_latency_not_the_service_time) {
  redis_server redis;
  const auto o = run_with_a_stall(redis, {});
  // 1500 requests, one every 2 ms; the 100 meant to go out during the 200 ms stall are each
  // answered only after it, late by the rest of it: uniformly (0, 200] ms. The top 1 % (15)
  // are all among them, late by at least 200 × (1 − 15/100) = 170 ms; the load of a shared
  // machine only adds. So the corrected p99 is >= 170 ms (120 ms leaves room for bucket
  // rounding and a stall that began with a request in flight).
  EXPECT_GE(at(o, "corrected_latency_us", "p99"), 120'000);
  EXPECT_GE(at(o, "corrected_latency_us", "max"), 170'000);
  // Only the 4 requests in flight when it began (0.3 %) were sent before the stall ended and
  // waited in Redis: the service-time p99 is an ordinary round trip. 60 ms is far above one on
  // a loaded machine and far below the stall.
  EXPECT_LT(at(o, "latency_us", "p99"), 60'000);
  EXPECT_GE(at(o, "latency_us", "max"), 100'000) << "the in-flight ones did wait";
  EXPECT_EQ(at(o, "open_loop", "dropped"), 0);
  EXPECT_EQ(at(o, "errors"), 0);
  EXPECT_EQ(at(o, "open_loop", "intended"), 1500);
}

TEST(bench_open_loop, requests_waiting_past_max_lag_are_dropped_and_counted) {
  redis_server redis;
  const auto o = run_with_a_stall(redis, {"--max-lag", "50ms"});
  // During the 200 ms stall all 4 slots are taken; each request due then waits 50 ms and is
  // dropped: about 75 of them (the last 150 ms of the stall, one every 2 ms).
  EXPECT_GE(at(o, "open_loop", "dropped"), 25);
  EXPECT_EQ(at(o, "open_loop", "intended"), 1500);
  EXPECT_EQ(at(o, "open_loop", "sent") + at(o, "open_loop", "dropped"), 1500);
  EXPECT_EQ(at(o, "decisions") + at(o, "errors"), at(o, "open_loop", "sent"));
}

// The sender itself late (its process stopped for 200 ms, as a starved CPU would): what it
// could not send within --max-lag of the intended time is dropped, though a slot is free
// (before: it was sent, up to 200 ms late, and the bound meant nothing).
TEST(bench_open_loop, a_sender_running_late_drops_what_it_cannot_send_in_time) {
  redis_server redis;
  // 64 slots: never all taken, so only the lateness can drop a request.
  std::vector<std::string> args{"--redis",  redis.url(), "--rate",  "500",     "--duration",
                                "3s",       "--threads", "1",       "--inflight", "64",
                                "--keys",   "100",       "--limit", "1000000", "--max-lag",
                                "50ms",     "--json"};
  auto bench = std::async(std::launch::async, [args] { return run_bench(args, 60); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (redis.command({"DBSIZE"}).integer == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(1s);
  pid_t sender = 0;
  for (const auto pid : children_of(::getpid())) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "floodgate-bench") sender = pid;
  }
  ASSERT_NE(sender, 0);
  // The supervisor and the worker process it forked (tools/floodgate_bench/supervisor.cpp).
  auto stopped = children_of(sender);
  stopped.push_back(sender);
  for (const auto pid : stopped) ::kill(pid, SIGSTOP);
  std::this_thread::sleep_for(200ms);
  for (const auto pid : stopped) ::kill(pid, SIGCONT);
  const auto o = parse_report(bench.get());
  // The ~100 due during the stop; those within 50 ms of the wake-up may still go: about 75.
  EXPECT_GE(at(o, "open_loop", "dropped"), 25);
  EXPECT_EQ(at(o, "open_loop", "sent") + at(o, "open_loop", "dropped"), 1500);
}

}  // namespace
}  // namespace floodgate::test
