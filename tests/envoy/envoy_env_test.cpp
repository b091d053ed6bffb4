// floodgated --envoy-env's mapping (service/main/envoy_env.cpp) from upstream's variables to
// floodgated's flags, without starting anything: envoy_env_process_test.cpp starts floodgated.
#include "main/envoy_env.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace {

using floodgate::service::envoy_env_error;
using floodgate::service::read_envoy_env;

using env_map = std::map<std::string, std::string>;

// The flags the environment `vars` means, as "flag value" lines, given `given` on the command
// line.
std::map<std::string, std::string> flags_of(const env_map& vars,
                                            std::set<std::string, std::less<>> given = {}) {
  const auto env = read_envoy_env(
      [&](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      given);
  std::map<std::string, std::string> out;
  for (const auto& [flag, value] : env.flags) out[flag] = value;
  return out;
}

// The message of the error `vars` give, or "" when they give none.
std::string error_of(const env_map& vars) {
  try {
    flags_of(vars);
    return "";
  } catch (const envoy_env_error& e) {
    return e.what();
  }
}

const env_map base = {{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis.local:6379"}};

env_map with(env_map m, const env_map& more) {
  for (const auto& [k, v] : more) m[k] = v;
  return m;
}

TEST(envoy_env, upstream_defaults_for_listeners_and_the_runtime_directory) {
  const auto f = flags_of(base);
  EXPECT_EQ(f.at("--listen"), "0.0.0.0:8080");
  EXPECT_EQ(f.at("--grpc-listen"), "0.0.0.0:8081");
  EXPECT_EQ(f.at("--redis"), "redis://redis.local:6379");
  EXPECT_EQ(f.at("--envoy-config"), "/srv/runtime_data/current/config");
  EXPECT_EQ(f.at("--log-level"), "warn");           // upstream's default, WARN
  EXPECT_TRUE(f.contains("--envoy-config-watch"));  // upstream always watches
  EXPECT_FALSE(f.contains("--admin-listen"));
  EXPECT_FALSE(f.contains("--envoy-shadow-mode"));
}

TEST(envoy_env, each_variable_maps_to_its_flag) {
  const auto f = flags_of(with(base, {{"HOST", "127.0.0.1"},
                                      {"PORT", "9000"},
                                      {"GRPC_HOST", "::1"},
                                      {"GRPC_PORT", "9001"},
                                      {"DEBUG_PORT", "9002"},
                                      {"RUNTIME_ROOT", "/data"},
                                      {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                                      {"RUNTIME_APPDIRECTORY", "rules"},
                                      {"LOG_LEVEL", "DEBUG"},
                                      {"SHADOW_MODE", "True"},
                                      {"LIMIT_RESPONSE_HEADERS_ENABLED", "1"},
                                      {"NEAR_LIMIT_RATIO", "0.8"},
                                      {"MERGE_DOMAIN_CONFIG", "false"},
                                      {"LOCAL_CACHE_SIZE_IN_BYTES", "1048576"},
                                      {"USE_STATSD", "false"}}));
  EXPECT_EQ(f.at("--listen"), "127.0.0.1:9000");
  EXPECT_EQ(f.at("--grpc-listen"), "[::1]:9001");
  EXPECT_EQ(f.at("--admin-listen"), "127.0.0.1:9002") << "admin on loopback unless DEBUG_HOST";
  EXPECT_EQ(f.at("--envoy-config"), "/data/ratelimit/rules");
  EXPECT_EQ(f.at("--log-level"), "debug");
  EXPECT_FALSE(f.contains("--log-format"));
  EXPECT_TRUE(f.contains("--envoy-shadow-mode"));
  EXPECT_TRUE(f.contains("--envoy-response-headers"));
}

TEST(envoy_env, redis_forms_single_sentinel_cluster_auth_and_tls) {
  EXPECT_EQ(flags_of(with(base, {{"REDIS_AUTH", "p@ss word"}})).at("--redis"),
            "redis://:p%40ss%20word@redis.local:6379");
  EXPECT_EQ(flags_of(with(base, {{"REDIS_AUTH", "app:secret"}})).at("--redis"),
            "redis://app:secret@redis.local:6379");
  EXPECT_EQ(flags_of(with(base, {{"REDIS_TYPE", "SENTINEL"},
                                 {"REDIS_URL", "mymaster,10.0.0.1:26379,10.0.0.2:26379"}}))
                .at("--redis"),
            "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster");
  EXPECT_EQ(flags_of(with(base, {{"REDIS_TYPE", "cluster"}, {"REDIS_URL", "a:7000,b:7001"}}))
                .at("--redis"),
            "redis+cluster://a:7000,b:7001");
  EXPECT_EQ(
      flags_of(with(base, {{"REDIS_TLS", "true"}, {"REDIS_TLS_CACERT", "/ca.pem"}})).at("--redis"),
      "rediss://redis.local:6379?tls_ca_file=/ca.pem");
}

// Upstream's gRPC TLS settings (GrpcServerTlsConfig): a CA file means mutual TLS.
TEST(envoy_env, grpc_tls_and_mutual_tls) {
  const auto f = flags_of(with(base, {{"GRPC_SERVER_USE_TLS", "true"},
                                      {"GRPC_SERVER_TLS_CERT", "/tls/tls.crt"},
                                      {"GRPC_SERVER_TLS_KEY", "/tls/tls.key"},
                                      {"GRPC_CLIENT_TLS_CACERT", "/tls/ca.crt"}}));
  EXPECT_EQ(f.at("--grpc-tls-cert"), "/tls/tls.crt");
  EXPECT_EQ(f.at("--grpc-tls-key"), "/tls/tls.key");
  EXPECT_EQ(f.at("--grpc-tls-ca"), "/tls/ca.crt");
  EXPECT_FALSE(
      flags_of(with(base, {{"GRPC_SERVER_USE_TLS", "false"}})).contains("--grpc-tls-cert"));
  EXPECT_NE(error_of(with(base, {{"GRPC_SERVER_USE_TLS", "true"}}))
                .find("GRPC_SERVER_USE_TLS=true: needs GRPC_SERVER_TLS_CERT and "
                      "GRPC_SERVER_TLS_KEY"),
            std::string::npos);
  EXPECT_NE(error_of(with(base, {{"GRPC_SERVER_TLS_CERT", "/tls/tls.crt"}}))
                .find("GRPC_SERVER_TLS_CERT=/tls/tls.crt: applies to TLS only"),
            std::string::npos);
  // Checking the client certificate's SAN is not implemented: refused, named.
  EXPECT_NE(error_of(with(base, {{"GRPC_CLIENT_TLS_SAN", "envoy"}})).find("GRPC_CLIENT_TLS_SAN"),
            std::string::npos);
}

TEST(envoy_env, a_flag_on_the_command_line_wins_and_its_variable_is_not_read) {
  // No REDIS_URL at all: no error, since --redis is given.
  const auto f = flags_of({{"GRPC_PORT", "9001"}}, {"--redis", "--grpc-listen"});
  EXPECT_FALSE(f.contains("--redis"));
  EXPECT_FALSE(f.contains("--grpc-listen"));
  EXPECT_EQ(f.at("--listen"), "0.0.0.0:8080");
}

TEST(envoy_env, settings_floodgated_does_not_implement_are_refused_by_name) {
  EXPECT_NE(error_of(with(base, {{"REDIS_POOL_SIZE", "10"}})).find("REDIS_POOL_SIZE=10"),
            std::string::npos);
  EXPECT_NE(error_of(with(base, {{"NEAR_LIMIT_RATIO", "0.9"}})).find("NEAR_LIMIT_RATIO"),
            std::string::npos);
  EXPECT_NE(error_of(with(base, {{"MERGE_DOMAIN_CONFIG", "true"}})).find("MERGE_DOMAIN_CONFIG"),
            std::string::npos);
  EXPECT_NE(error_of(with(base, {{"USE_STATSD", "true"}})).find("USE_STATSD"), std::string::npos);
  EXPECT_NE(error_of(with(base, {{"BACKEND_TYPE", "memcache"}})).find("BACKEND_TYPE"),
            std::string::npos);
  EXPECT_NE(error_of(with(base, {{"REDIS_SOCKET_TYPE", "unix"}})).find("REDIS_SOCKET_TYPE"),
            std::string::npos);
  EXPECT_NE(error_of({}).find("REDIS_URL"), std::string::npos);
  EXPECT_NE(error_of(with(base, {{"SHADOW_MODE", "yes"}})).find("SHADOW_MODE=yes"),
            std::string::npos);
  EXPECT_NE(error_of(with(base, {{"REDIS_TYPE", "sentinel"}})).find("mastername"),
            std::string::npos);
  EXPECT_NE(error_of(with(base, {{"REDIS_URL", "a:1,b:2"}})).find("REDIS_TYPE"), std::string::npos);
  EXPECT_NE(error_of(with(base, {{"REDIS_TLS_CACERT", "/ca.pem"}})).find("REDIS_TLS=true"),
            std::string::npos);
  // An empty value is unset, as a Kubernetes manifest's "" means.
  EXPECT_EQ(error_of(with(base, {{"REDIS_POOL_SIZE", ""}})), "");
}

}  // namespace

namespace {
TEST(envoy_env, log_format_json_and_text) {
  EXPECT_EQ(flags_of(with(base, {{"LOG_FORMAT", "json"}})).at("--log-format"), "json");
  EXPECT_EQ(flags_of(with(base, {{"LOG_FORMAT", "text"}})).at("--log-format"), "logfmt");
  EXPECT_NE(error_of(with(base, {{"LOG_FORMAT", "xml"}})).find("LOG_FORMAT=xml"),
            std::string::npos);
}
}  // namespace
