// examples/coroutine_server.cpp, started as a process on a real Redis: it rate-limits its own
// requests by client address (5 a minute), answering 429 with Retry-After past that.
#include <gtest/gtest.h>

#include <csignal>

#include "child_process.hpp"
#include "http_client.hpp"
#include "integration_support.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

TEST(coroutine_server_example, serves_and_rate_limits_its_own_requests) {
  redis_server redis;
  const auto port = free_port();
  const std::string dir = make_temp_dir("coroutine-server");
  child_process server({FLOODGATE_COROUTINE_SERVER, std::to_string(port), redis.url()},
                       {.output = dir + "/out.log"});
  ASSERT_EQ(
      server.wait_ready(
          [&] { return read_file(dir + "/out.log").find("listening") != std::string::npos; }, 10s),
      child_process::readiness::ready);

  http_connection keep_alive(port);  // one connection for the first three, as browsers do
  for (int i = 1; i <= 3; ++i) {
    auto r = keep_alive.request("GET", "/");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("RateLimit-Remaining"), std::to_string(5 - i));
  }
  for (int i = 4; i <= 5; ++i) EXPECT_EQ(http_request_once(port, "GET", "/").status, 200);
  auto denied = http_request_once(port, "GET", "/");
  EXPECT_EQ(denied.status, 429) << denied.body;
  ASSERT_TRUE(denied.header("Retry-After"));
  EXPECT_GT(std::stoi(*denied.header("Retry-After")), 0);
  EXPECT_LE(std::stoi(*denied.header("Retry-After")), 60);

  // The limit lives in Redis: one sliding-log key for this client, holding its 5 requests.
  const auto keys = scan_keys(redis, "floodgate:hello:*");
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_NE(keys[0].find("{127.0.0.1}"), std::string::npos) << keys[0];
  EXPECT_EQ(sliding_log_units(redis, keys[0]), 5);

  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(10s), 0);
  const std::string log = read_file(dir + "/out.log");
  EXPECT_NE(log.find("127.0.0.1 GET / -> over_limit"), std::string::npos) << log;
}

}  // namespace
}  // namespace floodgate::test
