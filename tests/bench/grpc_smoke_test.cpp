// floodgate-bench's gRPC target (Envoy's ShouldRateLimit) against the real floodgated on a
// real redis-server: the same burst from several processes admits exactly the rule's limit.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "bench_process.hpp"
#include "floodgated_process.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;

TEST(bench_grpc, a_burst_through_the_envoy_api_admits_exactly_the_limit) {
  redis_server redis;
  const auto dir = make_temp_dir("bench-grpc-");
  std::ofstream(dir + "/bench.yaml") << "domain: bench\ndescriptors:\n  - key: bench\n"
                                        "    rate_limit: {unit: minute, requests_per_unit: 20, "
                                        "algorithm: sliding_log}\n";
  floodgated_process service("rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
                             {.extra_args = {"--redis", redis.url(), "--grpc-listen", "127.0.0.1:0",
                                             "--envoy-config", dir + "/bench.yaml"}});
  const auto r =
      run_bench({"--grpc", "127.0.0.1:" + std::to_string(service.grpc_port()), "--rule", "bench",
                 "--algorithm", "sliding_log", "--limit", "20", "--window", "60s", "--burst", "15",
                 "--processes", "3", "--threads", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto o = json::parse(r.out).as_object();
  EXPECT_EQ(o.at("decisions").to_number<std::int64_t>(), 90);
  EXPECT_EQ(o.at("allowed").to_number<std::int64_t>(), 20);
  EXPECT_EQ(o.at("errors").to_number<std::int64_t>(), 0);
  EXPECT_EQ(o.at("over_admitted").to_number<std::int64_t>(), 0);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// --h2-streams: calls multiplexed on each thread's connection (grpc_h2_mux), from several
// processes at one instant, admit exactly the limit too, every call answered.
TEST(bench_grpc, multiplexed_calls_admit_exactly_the_limit) {
  redis_server redis;
  const auto dir = make_temp_dir("bench-grpc-");
  std::ofstream(dir + "/bench.yaml") << "domain: bench\ndescriptors:\n  - key: bench\n"
                                        "    rate_limit: {unit: minute, requests_per_unit: 50, "
                                        "algorithm: sliding_log}\n";
  floodgated_process service("rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
                             {.extra_args = {"--redis", redis.url(), "--grpc-listen", "127.0.0.1:0",
                                             "--envoy-config", dir + "/bench.yaml"}});
  const auto r =
      run_bench({"--grpc", "127.0.0.1:" + std::to_string(service.grpc_port()), "--rule", "bench",
                 "--algorithm", "sliding_log", "--limit", "50", "--window", "60s", "--burst", "40",
                 "--processes", "2", "--threads", "2", "--h2-streams", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto o = json::parse(r.out).as_object();
  EXPECT_EQ(o.at("decisions").to_number<std::int64_t>(), 160);
  EXPECT_EQ(o.at("allowed").to_number<std::int64_t>(), 50);
  EXPECT_EQ(o.at("errors").to_number<std::int64_t>(), 0);
  EXPECT_EQ(o.at("over_admitted").to_number<std::int64_t>(), 0);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
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
