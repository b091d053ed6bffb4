// Real nginx in front of an app, calling floodgated with auth_request (examples/nginx.conf):
// 200 until the limit, then 429 with Retry-After; the app never sees a denied request.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "nginx_process.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

const char* const rules =
    "rules:\n  - {name: api, algorithm: sliding_log, limit: 15, window: 1h, key: "
    "\"header:X-Api-Key\"}\n";

TEST(nginx, clients_get_200_until_the_limit_then_429_and_the_app_never_sees_a_denial) {
  floodgated_process fg(rules);
  nginx_process nginx(fg.port());

  constexpr int threads = 4;
  constexpr int per_thread = 10;
  std::atomic<int> ok{0};
  std::atomic<int> limited{0};
  std::atomic<int> other{0};
  std::atomic<int> bad_429{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t)
    clients.emplace_back([&] {
      http_connection c(nginx.port());
      for (int i = 0; i < per_thread; ++i) {
        const auto r = c.request("GET", "/api/things", {}, {{"X-Api-Key", "shared"}});
        if (r.status == 200 && r.body == "hello from the app\n") {
          ++ok;
          if (!r.header("RateLimit") || !r.header("RateLimit-Policy")) ++other;
        } else if (r.status == 429) {
          ++limited;
          const auto retry = r.header("Retry-After");
          if (!retry || std::stoi(*retry) < 1 ||
              r.header("RateLimit-Policy").value_or("") != R"("api";q=15;w=3600)")
            ++bad_429;
        } else {
          ++other;
        }
      }
    });
  for (auto& c : clients) c.join();

  EXPECT_EQ(ok, 15);
  EXPECT_EQ(limited, threads * per_thread - 15);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(bad_429, 0) << "every 429 carries Retry-After and RateLimit-Policy";
  EXPECT_EQ(nginx.app_hits(15), 15u) << "denied requests never reach the app";

  // Other keys have their own budget; no key at all is the client's error, not ours.
  const auto bob = http_request_once(nginx.port(), "GET", "/api/x", {}, {{"X-Api-Key", "bob"}});
  EXPECT_EQ(bob.status, 200);
  EXPECT_EQ(bob.header("RateLimit").value_or(""), R"("api";r=14;t=3600)");
  EXPECT_EQ(http_request_once(nginx.port(), "GET", "/api/x").status, 400);
  // auth_request asks with GET whatever the client's method, and never forwards the body.
  EXPECT_EQ(
      http_request_once(nginx.port(), "POST", "/api/x", "payload", {{"X-Api-Key", "carol"}}).status,
      200);
  EXPECT_EQ(nginx.app_hits(17), 17u);
  // So a client's HEAD is counted too: floodgated's HEAD /v1/auth is an uncounted peek, and must
  // not be what nginx asks for.
  EXPECT_EQ(http_request_once(nginx.port(), "HEAD", "/api/x", {}, {{"X-Api-Key", "dave"}}).status,
            200);
  const auto dave =
      http_request_once(fg.port(), "POST", "/v1/check", R"({"rule":"api","key":"dave","cost":0})");
  EXPECT_NE(dave.body.find("\"remaining\":14"), std::string::npos) << dave.body;
}

TEST(nginx, an_unreachable_floodgated_fails_closed_with_503) {
  floodgated_process fg(rules);
  nginx_process nginx(fg.port());
  EXPECT_EQ(http_request_once(nginx.port(), "GET", "/api/x", {}, {{"X-Api-Key", "a"}}).status, 200);
  fg.signal(SIGTERM);
  ASSERT_EQ(fg.wait_exit(5s), 0);
  EXPECT_EQ(http_request_once(nginx.port(), "GET", "/api/x", {}, {{"X-Api-Key", "a"}}).status, 503);
  EXPECT_EQ(nginx.app_hits(1), 1u);
}

}  // namespace
}  // namespace floodgate::test
