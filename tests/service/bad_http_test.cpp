// Hostile and broken HTTP against the real floodgated: each gets the right 4xx or a closed
// connection within the read deadline, and the server keeps serving everyone else.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "admin_port.hpp"
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

// RFC 9112 6.1: a transfer coding the server does not understand is a 501. Read as plain
// chunked, a gzip body would be garbage decided as if it meant something.
TEST(bad_http, chunked_after_another_coding_is_501_and_closed) {
  floodgated_process fg(rules);
  const std::string body = R"({"rule":"api","key":"k"})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  for (const char* codings : {"gzip, chunked", "deflate,chunked", "x-custom ,  chunked"}) {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + std::string(codings) +
        "\r\n\r\n" + size + "\r\n" + body + "\r\n0\r\n\r\n"));
    const auto r = c.read_reply();
    EXPECT_EQ(r.status, 501) << codings;
    EXPECT_NE(r.body.find("only chunked"), std::string::npos) << r.body;
    EXPECT_TRUE(c.closed_by_peer(3s));
  }
  // Two lines are one list: gzip then chunked.
  http_connection c(fg.port());
  ASSERT_TRUE(
      c.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 501);
  expect_still_serving(fg);
}

// RFC 9112 3.2: an HTTP/1.1 request without Host, or any with two, is a 400. HTTP/1.0 needs
// none.
TEST(bad_http, http_1_1_without_host_or_with_two_is_400_and_closed) {
  floodgated_process fg(rules);
  for (const char* request :
       {"GET /healthz HTTP/1.1\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /healthz HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"}) {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw(request));
    const auto r = c.read_reply();
    EXPECT_EQ(r.status, 400) << request;
    EXPECT_NE(r.body.find("Host"), std::string::npos) << r.body;
    EXPECT_TRUE(c.closed_by_peer(3s));
  }
  http_connection c(fg.port());
  ASSERT_TRUE(c.send_raw("GET /healthz HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 200);
  expect_still_serving(fg);
}

// RFC 9110 7.2, RFC 9112 3.2: a Host whose value is not uri-host [":" port] is a 400 (and the
// connection closed, as for the other Host refusals). "Host: a b" was served (200).
TEST(bad_http, a_host_value_that_is_not_a_host_is_400_and_closed) {
  floodgated_process fg(rules);
  for (const char* host : {"a b", "a\tb", "a/b", "a@b", "x:80a", "x:99999", "x:1:2", "[::1",
                           "[::1]x", "[nope]", "[127.0.0.1]", "::1", "a%zz", "\"a\""}) {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw(std::string("GET /healthz HTTP/1.1\r\nHost: ") + host + "\r\n\r\n"));
    const auto r = c.read_reply();
    EXPECT_EQ(r.status, 400) << host;
    EXPECT_NE(r.body.find("Host header is not a host"), std::string::npos) << host << r.body;
    EXPECT_TRUE(c.closed_by_peer(3s)) << host;
  }
  // Names, addresses, ports, an empty value (a target without authority), IPvFuture,
  // percent-encoding: served.
  for (const char* host :
       {"127.0.0.1:8080", "localhost", "a.example:80", "[::1]", "[::1]:8080", "",
        "x:", "[v1.fe80::1+en0]", "a%41b", "under_score.example", "[2001:db8::7]:443"}) {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw(std::string("GET /healthz HTTP/1.1\r\nHost: ") + host + "\r\n\r\n"));
    EXPECT_EQ(c.read_reply().status, 200) << host;
  }
  expect_still_serving(fg);
}

// RFC 9112 3.2.2: a server MUST accept the absolute-form (http://host/path), and an origin
// server takes the host from it, not from Host. It was routed as the path "http://..." (404).
TEST(bad_http, an_absolute_form_target_is_served_as_its_path) {
  floodgated_process::options opts;
  opts.extra_args = {"--admin-listen", "127.0.0.1:0"};
  floodgated_process fg(rules, opts);
  const auto admin = admin_port_of(fg);
  http_connection c(fg.port());
  const std::string body = R"({"rule":"api","key":"abs"})";
  ASSERT_TRUE(
      c.send_raw("POST http://127.0.0.1/v1/check?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body));
  const auto r = c.read_reply();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"remaining\":99"), std::string::npos) << r.body;
  ASSERT_TRUE(c.send_raw("GET HTTP://x.example:80 HTTP/1.1\r\nHost: x.example\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 404) << "an empty path is /";
  ASSERT_TRUE(c.send_raw("GET https://x.example/healthz HTTP/1.1\r\nHost: x.example\r\n\r\n"));
  EXPECT_EQ(c.read_reply().status, 200);

  // The admin listener's Host check takes the target's host: its own address passes whatever
  // Host says, another name is refused whatever Host says.
  http_connection a(admin);
  ASSERT_TRUE(a.send_raw("GET http://127.0.0.1:" + std::to_string(admin) +
                         "/healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n"));
  EXPECT_EQ(a.read_reply().status, 200);
  ASSERT_TRUE(a.send_raw("GET http://evil.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  const auto refused = a.read_reply();
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("evil.example"), std::string::npos) << refused.body;
  http_connection a10(admin);  // HTTP/1.0 needs no Host: the target's is checked all the same
  ASSERT_TRUE(a10.send_raw("GET http://evil.example/healthz HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(a10.read_reply().status, 403);
  expect_still_serving(fg);
}

// {"rule":"api",...,"rule":"global"}: one reader sees api, another global. Refused, at any
// depth.
TEST(bad_http, duplicate_json_fields_are_400) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  for (const char* body :
       {R"({"rule":"api","key":"k","rule":"api"})", R"({"rule":"api","key":"a","key":"b"})",
        R"({"rules":[{"rule":"api","key":"k","cost":1,"cost":2}]})"}) {
    const auto r = c.request("POST", "/v1/check", body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(r.body.find("duplicate field"), std::string::npos) << r.body;
  }
  EXPECT_EQ(c.request("POST", "/v1/check", R"({"rule":"api","key":"k"})").status, 200);
}

// Each pipelined request gets its own header deadline. A client that keeps pipelining, each
// request's header arriving in two parts, is served for longer than the 5 s header deadline:
// the deadline counts from each request, not from accept.
TEST(bad_http, a_connection_that_keeps_pipelining_is_not_cut_at_the_header_deadline) {
  floodgated_process fg(rules);
  http_connection c(fg.port());
  const std::string head = "GET /healthz HTTP/1.1\r\nHo";
  const std::string tail = "st: x\r\n\r\n";
  ASSERT_TRUE(c.send_raw(head + tail + head));  // one whole request, the next one's start
  const auto start = std::chrono::steady_clock::now();
  int served = 0;
  while (std::chrono::steady_clock::now() - start < 6500ms) {
    const auto r = c.read_reply();
    ASSERT_EQ(r.status, 200) << "cut after " << served << " requests, "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count()
                             << " ms";
    ++served;
    std::this_thread::sleep_for(200ms);
    ASSERT_TRUE(c.send_raw(tail + head));  // finish the buffered one, start another
  }
  EXPECT_EQ(c.read_reply().status, 200);
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

// A chunk-size line, a chunk extension or a trailer that never ends is framing Beast's parser
// cannot consume until it is whole: it must not grow the read buffer without a bound (one
// connection once held 300 MB). Each is refused with 413 before 4 MiB has gone in.
TEST(bad_http, endless_chunk_framing_is_413_not_a_growing_buffer) {
  floodgated_process fg(rules);
  const std::string start =
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const struct {
    const char* what;
    std::string head;
    char filler;
  } cases[] = {
      {"a chunk extension", start + "1;", 'a'},
      {"a chunk size of leading zeros", start, '0'},
      {"a trailer", start + "0\r\nX-A: ", 'a'},
  };
  const std::string piece(64 * 1024, 'x');
  for (const auto& c : cases) {
    http_connection conn(fg.port());
    ASSERT_TRUE(conn.send_raw(c.head)) << c.what;
    const std::string filler(piece.size(), c.filler);
    std::size_t sent = 0;
    while (sent < (4u << 20) && conn.send_raw(filler)) sent += filler.size();
    const auto r = conn.read_reply();
    EXPECT_EQ(r.status, 413) << c.what << " (" << sent << " bytes sent): " << r.body;
    EXPECT_TRUE(conn.closed_by_peer(3s)) << c.what;
  }
  expect_still_serving(fg);
}

TEST(bad_http, garbage_is_400_and_closed) {
  floodgated_process fg(rules);
  for (const char* request : {"HELLO THERE\r\n\r\n", "GET / HTTP/x.y\r\n\r\n",
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

}  // namespace
}  // namespace floodgate::test
