// floodgate-bench's gRPC target (Envoy's ShouldRateLimit) against the real floodgated on a
// real redis-server: the same burst from several processes admits exactly the rule's limit.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_process.hpp"
#include "floodgated_process.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;

// floodgated on a real redis-server whose Envoy domain `bench` has the rule `bench`: `limit`
// a minute, sliding_log (exact, so the bench's accuracy check can judge every admission).
struct envoy_on_redis {
  explicit envoy_on_redis(int limit) {
    std::ofstream(dir + "/bench.yaml") << "domain: bench\ndescriptors:\n  - key: bench\n"
                                          "    rate_limit: {unit: minute, requests_per_unit: "
                                       << limit << ", algorithm: sliding_log}\n";
    service = std::make_unique<floodgated_process>(
        "rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
        floodgated_process::options{.extra_args = {"--redis", redis.url(), "--grpc-listen",
                                                   "127.0.0.1:0", "--envoy-config",
                                                   dir + "/bench.yaml"}});
  }
  ~envoy_on_redis() {
    service.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  // floodgate-bench's JSON for a burst against it, with `load` (processes, threads, ...).
  json::object burst(int limit, const std::vector<std::string>& load) const {
    std::vector<std::string> args = {"--grpc", "127.0.0.1:" + std::to_string(service->grpc_port()),
                                     "--rule", "bench", "--algorithm", "sliding_log", "--limit",
                                     std::to_string(limit), "--window", "60s", "--json"};
    args.insert(args.end(), load.begin(), load.end());
    const auto r = run_bench(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out).as_object() : json::object{};
  }
  redis_server redis;
  std::string dir = make_temp_dir("bench-grpc-");
  std::unique_ptr<floodgated_process> service;
};

void expect_exact(const json::object& o, std::int64_t decisions, std::int64_t limit) {
  ASSERT_FALSE(o.empty());
  EXPECT_EQ(o.at("decisions").to_number<std::int64_t>(), decisions);
  EXPECT_EQ(o.at("allowed").to_number<std::int64_t>(), limit);
  EXPECT_EQ(o.at("errors").to_number<std::int64_t>(), 0);
  EXPECT_EQ(o.at("over_admitted").to_number<std::int64_t>(), 0);
}

TEST(bench_grpc, a_burst_through_the_envoy_api_admits_exactly_the_limit) {
  const envoy_on_redis s(20);
  expect_exact(s.burst(20, {"--burst", "15", "--processes", "3", "--threads", "2"}), 90, 20);
}

// --h2-streams: calls multiplexed on each thread's connection (grpc_h2_mux), from several
// processes at one instant, admit exactly the limit too, every call answered.
TEST(bench_grpc, multiplexed_calls_admit_exactly_the_limit) {
  const envoy_on_redis s(50);
  expect_exact(
      s.burst(50, {"--burst", "40", "--processes", "2", "--threads", "2", "--h2-streams", "8"}),
      160, 50);
}

// The client's own HTTP/2 (grpc_h2_client): an error arrives as trailers only, and its status
// and percent-encoded message must reach the user as the server wrote them.
TEST(bench_grpc, a_grpc_error_is_reported_with_its_status_and_message) {
  floodgated_process service("rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
                             {.extra_args = {"--grpc-listen", "127.0.0.1:0"}});
  const auto r = run_bench({"--grpc", "127.0.0.1:" + std::to_string(service.grpc_port()),
                            "--domain", "", "--rule", "bench", "--burst", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot reach the target: grpc: status 3: domain must not be empty"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace floodgate::test
