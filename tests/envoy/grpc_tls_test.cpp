// gRPC over TLS and mutual TLS (--grpc-tls-cert, --grpc-tls-key, --grpc-tls-ca): real handshakes
// from grpc-js (rls_client.js) with certificates the openssl tool makes for the test, through
// floodgated's own acceptor (the connection caps) and its TLS handshake. A TLS call is answered;
// a plaintext client, a client without a certificate and one whose certificate another CA
// signed are refused, and charge nothing; a handshake that never comes is cut at its deadline;
// bad files stop start-up, named.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "real_clock_window.hpp"
#include "rls_process.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> tls_flags(const tls_certificates& certs) {
  return {"--grpc-tls-cert", certs.path("server.crt"), "--grpc-tls-key", certs.path("server.key")};
}

json::object health_check() {
  return json::object{{"health", ""}};
}

// The client's first result: its gRPC status code when it failed, else -1.
// A plain TCP connection to floodgated's gRPC port that sends nothing; -1 if it failed.
int connect_silently(const rls_process& p) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(p.address().substr(10))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  ::close(fd);
  return -1;
}

std::int64_t failure_code(const json::array& results, std::size_t i) {
  const auto& r = results.at(i).as_array().at(0).as_object();
  return r.contains("code") ? r.at("code").as_int64() : -1;
}

constexpr std::int64_t unavailable = 14;  // gRPC's UNAVAILABLE: no connection could be made

TEST(grpc_tls, a_tls_call_is_answered_and_a_plaintext_client_refused) {
  tls_certificates certs;
  rls_process p("", tls_flags(certs));
  EXPECT_NE(p.fg().log().find("tls=on"), std::string::npos) << p.fg().log();
  const std::vector<std::string> over_tls = {"--tls-ca", certs.path("ca.crt")};
  const auto call = check(request_of({{"remote_address", "198.51.100.7"}}));
  // 30 a minute (a fixed window on the real clock), counted across three client runs (a node
  // process each, up to 2 s to start on a loaded machine) and a 5 s wait for the log.
  inside_one_window(1min, 3 * 2s + 5s);

  auto results = run_client(p, {call, health_check()}, over_tls);
  EXPECT_EQ(response(results, 0).at("overall_code"), "OK");
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 29);
  EXPECT_EQ(response(results, 1).at("status"), "SERVING");

  const auto from = p.fg().log().size();
  results = run_client(p, {call});  // plaintext
  EXPECT_EQ(failure_code(results, 0), unavailable) << json::serialize(results);
  EXPECT_TRUE(p.fg().wait_for_log("grpc tls handshake failed", 5s, from)) << p.fg().log();

  // The refused call charged nothing.
  results = run_client(p, {call}, over_tls);
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 28);
}

TEST(grpc_tls, mutual_tls_refuses_a_client_without_a_certificate_the_ca_signed) {
  tls_certificates certs;
  auto flags = tls_flags(certs);
  flags.insert(flags.end(), {"--grpc-tls-ca", certs.path("ca.crt")});
  rls_process p("", flags);
  EXPECT_NE(p.fg().log().find("tls=mutual"), std::string::npos) << p.fg().log();
  const auto call = check(request_of({{"remote_address", "198.51.100.8"}}));
  const auto ca = certs.path("ca.crt");

  auto results = run_client(p, {call}, {"--tls-ca", ca});  // no client certificate
  EXPECT_EQ(failure_code(results, 0), unavailable) << json::serialize(results);
  results = run_client(p, {call},
                       {"--tls-ca", ca, "--tls-cert", certs.path("other.crt"), "--tls-key",
                        certs.path("other.key")});  // another CA's
  EXPECT_EQ(failure_code(results, 0), unavailable) << json::serialize(results);

  results = run_client(p, {call, health_check()},
                       {"--tls-ca", ca, "--tls-cert", certs.path("client.crt"), "--tls-key",
                        certs.path("client.key")});
  EXPECT_EQ(response(results, 0).at("overall_code"), "OK");
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 29)
      << "the refused clients charged nothing";
  EXPECT_EQ(response(results, 1).at("status"), "SERVING");
}

// A client that connects and never starts its handshake holds its connection (and a place
// under the caps) for the handshake's deadline only (grpc_tls.hpp: 5 s).
TEST(grpc_tls, a_handshake_that_never_comes_is_cut_at_its_deadline) {
  tls_certificates certs;
  rls_process p("", tls_flags(certs));
  const int fd = connect_silently(p);
  ASSERT_GE(fd, 0);
  const auto start = std::chrono::steady_clock::now();
  constexpr auto handshake_timeout = 5s;
  pollfd pfd{fd, POLLIN, 0};
  const int n = ::poll(&pfd, 1, static_cast<int>((handshake_timeout * 2 / 1ms)));
  const auto waited = std::chrono::steady_clock::now() - start;
  char byte = 0;
  EXPECT_EQ(n, 1) << "still open after twice the handshake's deadline";
  EXPECT_EQ(::read(fd, &byte, 1), 0) << "closed, nothing sent";
  EXPECT_GE(waited, handshake_timeout - 100ms);
  ::close(fd);
}

// Without TLS the same deadline holds for HTTP/2's preface: a client that connects and sends
// nothing gets the server's SETTINGS, then the connection is closed 5 s after it was accepted.
// (gRPC 1.51's server, handed the connection, still held it silent after 15 s.)
TEST(grpc_tls, a_plaintext_connection_that_never_sends_its_preface_is_cut_at_the_deadline) {
  rls_process p("");
  const int fd = connect_silently(p);
  ASSERT_GE(fd, 0);
  const auto start = std::chrono::steady_clock::now();
  char buf[256];
  ssize_t n = 0;
  std::size_t got = 0;
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 10'000) != 1) break;
    if ((n = ::read(fd, buf, sizeof buf)) <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(n, 0) << "closed (not still open after 10 s of silence)";
  EXPECT_GE(got, 9u) << "the server's SETTINGS frame came first";
  EXPECT_GE(waited, 4900ms);
  EXPECT_LE(waited, 9s);
  ::close(fd);
}

// TLS connections go through floodgated's acceptor like plaintext ones: a connection still in
// its handshake holds its client's place under the per-address cap.
TEST(grpc_tls, tls_connections_count_under_the_caps) {
  tls_certificates certs;
  auto flags = tls_flags(certs);
  flags.insert(flags.end(), {"--grpc-max-connections-per-peer", "1"});
  rls_process p("", flags);
  const std::vector<std::string> over_tls = {"--tls-ca", certs.path("ca.crt")};
  const auto call = check(request_of({{"remote_address", "198.51.100.9"}}));
  const int fd = connect_silently(p);
  ASSERT_GE(fd, 0);
  auto results = run_client(p, {call}, over_tls);  // the silent connection holds the one place
  EXPECT_EQ(failure_code(results, 0), unavailable) << json::serialize(results);
  ::close(fd);
  // The relay sees the close at once; a client that still comes first is refused: try again,
  // a few times (each try starts Node, ~0.2 s).
  for (int attempt = 0; attempt < 5; ++attempt) {
    results = run_client(p, {call}, over_tls);
    if (failure_code(results, 0) != unavailable) break;
  }
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 29);
}

TEST(grpc_tls, bad_files_stop_start_up_named) {
  tls_certificates certs;
  const std::string config = FLOODGATE_SOURCE_DIR "/tests/envoy/upstream_configs";
  const auto start = [&](std::vector<std::string> tls) {
    std::vector<std::string> args = {"--grpc-listen", "127.0.0.1:0", "--envoy-config",
                                     config,          "--listen",    "127.0.0.1:0"};
    args.insert(args.end(), tls.begin(), tls.end());
    return run_floodgated(args);
  };
  const auto missing = certs.path("missing.key");
  auto r = start({"--grpc-tls-cert", certs.path("server.crt"), "--grpc-tls-key", missing});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(
      r.output.find("--grpc-tls-key '" + missing + "': cannot read it: No such file or directory"),
      std::string::npos)
      << r.output;

  if (::geteuid() != 0) {  // root reads any file
    const auto locked = certs.path("locked.key");
    std::filesystem::copy_file(certs.path("server.key"), locked);
    ::chmod(locked.c_str(), 0);
    r = start({"--grpc-tls-cert", certs.path("server.crt"), "--grpc-tls-key", locked});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("--grpc-tls-key '" + locked + "': cannot read it: Permission denied"),
              std::string::npos)
        << r.output;
  }

  r = start(
      {"--grpc-tls-cert", certs.path("server.crt"), "--grpc-tls-key", certs.path("client.key")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--grpc-tls-key '" + certs.path("client.key") +
                          "' is not the key of --grpc-tls-cert"),
            std::string::npos)
      << r.output;

  r = start(
      {"--grpc-tls-cert", certs.path("openssl.log"), "--grpc-tls-key", certs.path("server.key")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("not a PEM certificate chain"), std::string::npos) << r.output;

  r = start({"--grpc-tls-cert", certs.path("server.crt"), "--grpc-tls-key",
             certs.path("server.key"), "--grpc-tls-ca", certs.path("missing.crt")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--grpc-tls-ca '" + certs.path("missing.crt") + "': cannot read it"),
            std::string::npos)
      << r.output;

  // Usage errors: the pair goes together, mutual TLS needs it.
  r = start({"--grpc-tls-cert", certs.path("server.crt")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--grpc-tls-cert and --grpc-tls-key go together"), std::string::npos);
  r = start({"--grpc-tls-ca", certs.path("ca.crt")});
  EXPECT_EQ(r.exit_code, 2) << r.output;

  const auto help = run_floodgated({"--help"});
  for (const char* flag : {"--grpc-tls-cert FILE", "--grpc-tls-key FILE", "--grpc-tls-ca FILE"})
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace floodgate::test
