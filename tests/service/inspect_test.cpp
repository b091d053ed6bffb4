// The raw state of a key (GET /v1/inspect and `floodgate inspect`) over TLS (rediss://, client
// certificates required), and errors that name the node and quote the server. Cluster and
// Sentinel: inspect_cluster_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "fault_relay.hpp"
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

// SIGTERM with slow inspects in flight: the drain does not wait for them. Redis answers every
// question 800 ms late, so each inspect (the peek, then TYPE, ZRANGE, ZCARD, PTTL) takes ~4 s.
// Before, the drain waited for the running one and the queued one in turn, up to its 10 s
// deadline, and then the worker's join waited for the one running at that moment: more than the
// documented 10 s. Now the queued one is answered 503 at once and the running one's raw read is
// cut short: the exit waits at most for its peek (here 800 ms).
TEST(inspect, sigterm_does_not_wait_for_slow_inspects) {
  using namespace std::chrono_literals;
  redis_server redis;
  fault_relay relay{redis.port()};
  floodgated_process::options o;
  o.extra_args = {"--redis", relay.url() + "?timeout=3s", "--admin-listen", "127.0.0.1:0"};
  floodgated_process fg(inspect_rules, o);
  const auto admin = admin_port_of(fg);
  wait_ready(fg);
  ASSERT_EQ(
      http_request_once(fg.port(), "POST", "/v1/check", R"({"rule":"api","key":"alice"})").status,
      200);
  relay.set_latency(800ms);
  http_connection running(admin), queued(admin);
  const std::string inspect =
      "GET /v1/inspect?rule=api&key=alice HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_TRUE(running.send_raw(inspect));
  std::this_thread::sleep_for(100ms);  // the worker takes it; the next one waits behind it
  ASSERT_TRUE(queued.send_raw(inspect));
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  fg.signal(SIGTERM);
  // The running inspect's peek (800 ms) and the process's own exit: well under 2.5 s.
  const auto code = fg.wait_exit(2500ms);
  EXPECT_EQ(code, std::optional<int>(0))
      << "still running "
      << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
      << " s after SIGTERM\n"
      << fg.log();
  EXPECT_EQ(queued.read_reply().status, 503);
  EXPECT_NE(running.read_reply().status, 0) << "the running inspect is answered";
}

}  // namespace
}  // namespace floodgate::test
