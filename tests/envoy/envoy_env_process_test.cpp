// floodgated --envoy-env started from envoyproxy/ratelimit's environment variables alone (Redis,
// the gRPC listener and the runtime directory), and refusing a setting it does not implement.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "redis_server.hpp"
#include "rls_process.hpp"

namespace floodgate::test {
namespace {

// Variables set for the test's children, unset again at the end of the test.
class scoped_env {
 public:
  explicit scoped_env(std::vector<std::pair<std::string, std::string>> vars)
      : vars_(std::move(vars)) {
    for (const auto& [k, v] : vars_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~scoped_env() {
    for (const auto& [k, v] : vars_) ::unsetenv(k.c_str());
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

json::array run_calls(const std::string& address, const std::string& dir,
                      const json::array& calls) {
  const auto in = dir + "/calls.json", out = dir + "/results.json", err = dir + "/client.err";
  write_file(in, json::serialize(calls));
  if (std::system(node_command(address, in, out, err).c_str()) != 0)
    throw std::runtime_error("the Node client failed:\n" + read_file(err));
  return json::parse(read_file(out)).as_array();
}

TEST(envoy_env_process, starts_from_upstreams_variables_alone) {
  redis_server redis;
  const auto root = make_temp_dir("floodgate-envoy-env-");
  std::filesystem::create_directories(root + "/ratelimit/config");
  write_file(root + "/ratelimit/config/edge.yaml", envoy_yaml);
  scoped_env env({{"REDIS_SOCKET_TYPE", "tcp"},
                  {"REDIS_URL", "127.0.0.1:" + std::to_string(redis.port())},
                  {"GRPC_HOST", "127.0.0.1"},
                  {"GRPC_PORT", "0"},
                  {"RUNTIME_ROOT", root},
                  {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                  {"USE_STATSD", "false"}});
  floodgated_process fg("rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
                        {.extra_args = {"--envoy-env"}});
  const auto address = "127.0.0.1:" + std::to_string(fg.grpc_port());
  const auto results = run_calls(address, root,
                                 json::array{check(request_of({{"remote_address", "50.0.0.5"}})),
                                             check(request_of({{"remote_address", "10.1.1.1"}}))});
  EXPECT_EQ(response(results, 0).at("overall_code"), "OVER_LIMIT") << fg.log();
  EXPECT_EQ(response(results, 1).at("overall_code"), "OK") << fg.log();
  // The second call was counted in the Redis REDIS_URL names.
  EXPECT_GE(redis.command({"DBSIZE"}).integer, 1) << fg.log();
  std::filesystem::remove_all(root);
}

TEST(envoy_env_process, an_upstream_setting_floodgated_does_not_implement_stops_start_up) {
  scoped_env env(
      {{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "127.0.0.1:6379"}, {"REDIS_POOL_SIZE", "10"}});
  const auto r = run_floodgated({"--envoy-env", "--config", "/nonexistent.yaml"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("REDIS_POOL_SIZE=10"), std::string::npos) << r.output;
}

TEST(envoy_env_process, without_the_flag_the_environment_is_not_read) {
  scoped_env env({{"REDIS_POOL_SIZE", "10"}, {"GRPC_PORT", "0"}});
  floodgated_process fg("rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n");
  EXPECT_EQ(fg.log().find("grpc listening"), std::string::npos) << fg.log();
}

}  // namespace
}  // namespace floodgate::test
