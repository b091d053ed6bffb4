// A lease granted to an HTTP caller that has gone by the time the answer is ready (issue 28,
// item 6): nobody can ever release it, so floodgated releases it itself instead of holding the
// slot for the whole lease. The caller leaves by closing (FIN) or by resetting (RST) while
// Redis holds the acquire (CLIENT PAUSE WRITE, shorter than the call's deadline, so the acquire
// is granted, not timed out).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "metrics_text.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr auto paused_for = 300ms;
const std::string acquire_body = R"({"rule":"exports","key":"acme"})";
const std::string lease_set = "floodgate:exports:cc:{acme}";

// Sends one /v1/acquire on a connection of its own and leaves without reading the answer:
// closing (FIN) or, with `reset`, aborting (SO_LINGER 0: RST).
void acquire_and_leave(std::uint16_t port, bool reset) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  const std::string request = "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                              std::to_string(acquire_body.size()) + "\r\n\r\n" + acquire_body;
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  // Long enough for floodgated to have read the request and sent the acquire (it waits in the
  // paused Redis), far shorter than the pause.
  std::this_thread::sleep_for(paused_for / 3);
  if (reset) {
    const linger abort_on_close{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  }
  ::close(fd);
}

class lease_disconnect : public ::testing::TestWithParam<bool> {};

TEST_P(lease_disconnect, a_lease_granted_to_a_caller_that_left_is_released) {
  redis_server redis;
  floodgated_process::options opts;
  // A deadline far above the pause: the acquire is granted, only late.
  opts.extra_args = {"--redis", redis.url() + "?timeout=5s"};
  floodgated_process fg(
      "rules:\n  - {name: exports, algorithm: concurrency, limit: 1, "
      "lease: 10m}\n",
      opts);
  http_connection c(fg.port());
  // Warm: connected, scripts loaded, and a normal caller keeps its lease.
  const auto kept = c.request("POST", "/v1/acquire", acquire_body);
  ASSERT_EQ(kept.status, 200) << kept.body;
  const auto lease = std::string(json::parse(kept.body).as_object().at("lease").as_string());
  ASSERT_EQ(redis.command({"ZCARD", lease_set}).integer, 1);
  ASSERT_EQ(c.request("POST", "/v1/release",
                      R"({"rule":"exports","key":"acme","lease":")" + lease + "\"}")
                .status,
            200);

  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", std::to_string(paused_for.count()), "WRITE"}).str,
            "OK");
  acquire_and_leave(fg.port(), GetParam());
  // A write waits behind the paused script: when it answers, the acquire has been granted.
  redis.command({"SET", "barrier", "1"});
  // The release is one Redis call after the grant; 5 s is far above it, and far below the
  // 10-minute lease a slot nobody releases is held for.
  const auto until = clock_type::now() + 5s;
  while (redis.command({"ZCARD", lease_set}).integer != 0 && clock_type::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(redis.command({"ZCARD", lease_set}).integer, 0)
      << "the lease of a caller that left still holds the only slot";
  const auto again = c.request("POST", "/v1/acquire", acquire_body);
  EXPECT_EQ(again.status, 200) << again.body;
}

INSTANTIATE_TEST_SUITE_P(caller_leaves_by, lease_disconnect, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "reset" : "close"; });

}  // namespace
}  // namespace floodgate::test
