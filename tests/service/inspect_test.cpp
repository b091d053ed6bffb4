// The raw state of a key (GET /v1/inspect and `floodgate inspect`) over TLS (rediss://, client
// certificates required), and errors that name the node and quote the server. Cluster and
// Sentinel: inspect_cluster_test.cpp.
#include <gtest/gtest.h>

#include "inspect_helpers.hpp"
#include "redis_server.hpp"
#include "tls_redis.hpp"

namespace floodgate::test {
namespace {

TEST(inspect, reads_the_raw_state_over_tls) {
  tls_redis server;
  const auto tls_port = server.tls_port;
  const auto url = server.url(server.certs.client_query());
  inspected_floodgated f(url);
  f.check("alice", 3);
  for (int i = 0; i < 2; ++i) expect_raw_state(f.inspect("alice"), "alice", 3, loopback(tls_port));
  expect_cli_raw_state(url, "alice", 3, loopback(tls_port));
  f.check("alice", 1);  // 6 left after it: inspecting consumed nothing
  expect_raw_state(f.inspect("alice"), "alice", 4, loopback(tls_port));

  // Without the client certificate the server ends the handshake: the note names the node.
  temp_rules_file rules(inspect_rules);
  const auto r = run_floodgate_cli({"inspect", "--redis",
                                    server.url("tls_ca_file=" + server.certs.path("ca.crt")),
                                    "--rules", rules.path, "api", "alice"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("floodgate: " + loopback(tls_port) + ": "), std::string::npos)
      << r.output;
}

// The server's own words: AUTH to a server without a password, a db it does not have.
TEST(inspect, errors_quote_the_server) {
  redis_server redis;
  temp_rules_file rules(inspect_rules);
  auto r = run_floodgate_cli({"inspect", "--redis",
                              "redis://:secret@127.0.0.1:" + std::to_string(redis.port()),
                              "--rules", rules.path, "api", "a"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(loopback(redis.port()) + ": AUTH refused: ERR AUTH"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("secret"), std::string::npos) << r.output;
  r = run_floodgate_cli({"inspect", "--redis",
                         "redis://127.0.0.1:" + std::to_string(redis.port()) + "/99", "--rules",
                         rules.path, "api", "a"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(loopback(redis.port()) + ": SELECT 99: ERR DB index is out of range"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace floodgate::test
