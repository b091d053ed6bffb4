// Hostile and broken HTTP against the real floodgated: each gets the right 4xx or a closed
// connection within the read deadline, and the server keeps serving everyone else.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

const char* const rules =
    "rules:\n  - {name: api, algorithm: sliding_log, limit: 100, window: 1m}\n";

// Every test ends by checking the server still serves a fresh client.
void expect_still_serving(const floodgated_process& fg) {
  EXPECT_EQ(
      http_request_once(fg.port(), "POST", "/v1/check", R"({"rule":"api","key":"ok"})").status,
      200);
}

TEST(bad_http, malformed_json_and_wrong_types_are_400_and_the_connection_stays_usable) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  for (const char* body :
       {"{", "nonsense", R"({"rule":"api","key":1})", R"({"rule":"api","key":"k","cost":-1})",
        R"({"rule":"api","key":"k","cost":101})", R"({"rule":"x","key":"k"})"}) {
    const auto r = c.request("POST", "/v1/check", body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.body;
  }
  EXPECT_EQ(c.request("POST", "/v1/check", R"({"rule":"api","key":"k"})").status, 200);
  const auto long_key =
      c.request("POST", "/v1/check", R"({"rule":"api","key":")" + std::string(1025, 'k') + "\"}");
  EXPECT_EQ(long_key.status, 400);
  EXPECT_EQ(c.request("GET", "/v1/check").status, 405);
  EXPECT_EQ(c.request("GET", "/nowhere").status, 404);
}

TEST(bad_http, oversized_body_is_413_and_closed) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  const std::string body(1 << 20, 'x');
  const auto r = c.request("POST", "/v1/check", body);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.header("Connection").value_or(""), "close");
  EXPECT_TRUE(c.closed_by_peer(3s));
  expect_still_serving(fg);
}

TEST(bad_http, oversized_body_announced_with_expect_continue_is_413_without_sending_it) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  ASSERT_TRUE(
      c.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n"
                 "Expect: 100-continue\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 413);
  expect_still_serving(fg);
}

TEST(bad_http, expect_continue_within_limits_works) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  const std::string body = R"({"rule":"api","key":"k"})";
  ASSERT_TRUE(c.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nExpect: 100-continue\r\n\r\n"));
  // The 100 comes first (read_reply skips it); only then do we send the body.
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(c.send_raw(body));
  EXPECT_EQ(c.read_reply().status, 200);
}

TEST(bad_http, oversized_headers_are_431) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  const auto r = c.request("GET", "/healthz", {}, {{"X-Junk", std::string(20000, 'j')}});
  EXPECT_EQ(r.status, 431);
  EXPECT_TRUE(c.closed_by_peer(3s));
  expect_still_serving(fg);
}

TEST(bad_http, content_length_with_transfer_encoding_is_400_and_closed) {
  floodgated_process fg(rules);
  for (const char* request : {"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: "
                              "5\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "0\r\n\r\n",
                              "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                              "chunked\r\nContent-Length: 5\r\n\r\n"
                              "0\r\n\r\n"}) {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw(request));
    EXPECT_EQ(c.read_reply().status, 400) << request;
    EXPECT_TRUE(c.closed_by_peer(3s));
  }
  expect_still_serving(fg);
}

TEST(bad_http, a_transfer_coding_other_than_chunked_is_400_and_closed) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  ASSERT_TRUE(
      c.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
                 "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 400);
  EXPECT_TRUE(c.closed_by_peer(3s));
  expect_still_serving(fg);
}

TEST(bad_http, chunked_bodies_are_fine) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  const std::string body = R"({"rule":"api","key":"k"})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  ASSERT_TRUE(
      c.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                 std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 200);
}

TEST(bad_http, garbage_is_400_and_closed) {
  floodgated_process fg(rules);
  for (const char* request : {"HELLO THERE\r\n\r\n", "GET / HTTP/9.9\r\n\r\n",
                              "GET /healthz HTTP/1.1\r\nBad Header Line\r\n\r\n"}) {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw(request));
    EXPECT_EQ(c.read_reply().status, 400) << request;
    EXPECT_TRUE(c.closed_by_peer(3s));
  }
  expect_still_serving(fg);
}

TEST(bad_http, pipelined_requests_are_answered_in_order) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  ASSERT_TRUE(
      c.send_raw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 200);
  EXPECT_EQ(c.read_reply().status, 404);
  EXPECT_EQ(c.read_reply().status, 200);
}

// A slow client (slowloris) that never finishes its headers is cut off at the header deadline
// (5 s); a client that connects and sends nothing likewise; others are served meanwhile.
TEST(bad_http, slow_clients_are_closed_at_the_header_deadline_while_others_are_served) {
  floodgated_process fg(rules);
  http_connection slow(fg.port());
  http_connection silent(fg.port());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(slow.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\n"));
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(250ms);
    slow.send_raw("X-Drip: " + std::to_string(i) + "\r\n");  // bytes, but never the end
    expect_still_serving(fg);
  }
  EXPECT_TRUE(slow.closed_by_peer(5s));
  EXPECT_TRUE(silent.closed_by_peer(1s));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 4500ms);
  EXPECT_LT(took, 7s);
  expect_still_serving(fg);
}

// Connections are capped (below the descriptor limit: 100 here, so 50): one more gets a 503 and
// is closed; once one closes, a new one is served.
TEST(bad_http, connections_over_the_cap_get_503_and_are_closed) {
  floodgated_process::options opts;
  opts.max_open_files = 100;
  floodgated_process fg(rules, opts);
  ASSERT_NE(fg.log().find("max_connections=50"), std::string::npos) << fg.log();
  std::vector<std::unique_ptr<http_connection>> open;
  for (int i = 0; i < 50; ++i) {
    open.push_back(std::make_unique<http_connection>(fg.port()));
    ASSERT_EQ(open.back()->request("GET", "/healthz").status, 200) << i;
  }
  http_connection extra(fg.port());
  const auto r = extra.read_reply();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("too many open connections"), std::string::npos);
  EXPECT_TRUE(extra.closed_by_peer(2s));
  // The served ones are unaffected.
  EXPECT_EQ(open.front()->request("GET", "/healthz").status, 200);
  open.pop_back();
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  int status = 0;
  while (status != 200 && std::chrono::steady_clock::now() < deadline) {
    status = http_request_once(fg.port(), "GET", "/healthz").status;
    if (status != 200) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(status, 200) << "a freed slot is used again";
}

}  // namespace
}  // namespace floodgate::test
