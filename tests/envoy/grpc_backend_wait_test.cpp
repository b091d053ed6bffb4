// A gRPC connection while its call waits at the backend (a real Redis holding it: CLIENT PAUSE
// WRITE, seen from Redis's blocked_clients): what the client sends meanwhile is read at once.
// A PING or SETTINGS is acknowledged, another call answered, an answer held by the client's
// window goes out on its WINDOW_UPDATE, a reset is counted CANCELLED and a half-closed
// connection is closed, all before the waiting call is decided. These are the cases a
// connection that stops reading while its calls are at the backend (to save the system call
// of a read on an empty socket, measured not to pay: grpc_connection.cpp) would delay to the
// backend's answer. The server runs in this process, a raw HTTP/2 client (raw_h2.hpp) calls it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "envoy_config.hpp"
#include "envoy_config_parse.hpp"
#include "floodgate/limiter.hpp"
#include "grpc_server.hpp"
#include "raw_h2.hpp"
#include "redis_server.hpp"
#include "rls_metrics.hpp"
#include "rls_service.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr std::string_view rls_method =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view health_check = "/grpc.health.v1.Health/Check";
// RateLimitRequest {domain: "edge", descriptors: [{entries: [{key: "k", value: "v"}]}]}.
const std::string rls_request(
    "\x0a\x04"
    "edge"
    "\x12\x08\x0a\x06\x0a\x01k\x12\x01v",
    16);
constexpr std::uint32_t cancel = 0x8;  // RST_STREAM's CANCEL

// A slack for a loaded machine (every test at once, sanitizers) on top of what is waited for.
constexpr auto slack = 10s;
// How long Redis holds the calls at most: the tests end it (CLIENT UNPAUSE) well before.
constexpr auto pause = 60s;

std::atomic<int> prefix_counter{0};

// floodgated's gRPC server on a free loopback port, a real Redis behind it that can hold calls.
struct at_backend {
  at_backend() : server(options(), service, metrics) {}
  static grpc_options options() {
    grpc_options o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
    return o;
  }
  static std::shared_ptr<floodgate::limiter> make_limiter(const test::redis_server& r) {
    backend_options bo;
    // A call held by the pause stays at the backend: neither the call's timeout nor the
    // connection's (a connection that owes replies that long counts as broken) may end it.
    bo.redis.timeout = pause + slack;
    bo.redis.connect_timeout = pause + slack;
    bo.redis.key_prefix =
        "wait" + std::to_string(::getpid()) + "_" + std::to_string(++prefix_counter) + ":";
    return std::make_shared<floodgate::limiter>(r.url(), bo);
  }

  // Holds the calls that reach Redis from now on (a script writes: CLIENT PAUSE WRITE holds it).
  void hold() { redis.command({"CLIENT", "PAUSE", std::to_string(pause / 1ms), "WRITE"}); }
  void release() { redis.command({"CLIENT", "UNPAUSE"}); }
  int waiting_in_redis() const {
    const auto info = redis.command({"INFO", "clients"}).str;
    const std::string field = "blocked_clients:";
    const auto at = info.find(field);
    return at == std::string::npos ? -1 : std::stoi(info.substr(at + field.size()));
  }
  // Until a call waits in Redis (false: none by the deadline).
  bool until_a_call_waits() const {
    for (const auto until = steady::now() + slack; steady::now() < until;) {
      if (waiting_in_redis() > 0) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  long metric(const std::string& series) const {
    std::string out;
    metrics.append(out);
    const auto at = out.find(series + " ");
    return at == std::string::npos ? 0 : std::stol(out.substr(at + series.size() + 1));
  }
  // Until `series` reaches `value` (its last reading otherwise).
  long until_metric(const std::string& series, long value) const {
    long v = 0;
    for (const auto until = steady::now() + slack; steady::now() < until;) {
      if ((v = metric(series)) >= value) return v;
      std::this_thread::sleep_for(10ms);
    }
    return v;
  }

  test::redis_server redis;
  std::shared_ptr<floodgate::limiter> limiter = make_limiter(redis);
  envoy_config_store store{std::make_shared<const envoy_config>(config_text::parse(R"(
domain: edge
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1000}
)"))};
  rls_metrics metrics;
  rls_service service{limiter, store, {}, &metrics};
  grpc_server server;
  // Destroyed first: a call still held would keep the server's shutdown waiting for it.
  struct releaser {
    at_backend& b;
    ~releaser() {
      try {
        b.release();
      } catch (...) {
      }
    }
  } releaser_{*this};
};

const std::string cancelled = "floodgate_envoy_requests_total{code=\"CANCELLED\"}";

// A connection whose call on stream 3 waits in Redis, after a first call (stream 1) has
// connected the backend and loaded its scripts.
void call_and_hold(at_backend& b, raw_h2& c) {
  c.start(65535);
  c.call(1, rls_method, rls_request);
  ASSERT_TRUE(c.next_of(1, raw_h2::headers_frame, steady::now() + slack)) << "no answer";
  b.hold();
  c.call(3, rls_method, rls_request);
  ASSERT_TRUE(b.until_a_call_waits()) << "the call never reached Redis";
}

// The next frame that `want` accepts, none if stream 3 (waiting in Redis) is answered first.
template <class Want>
std::optional<raw_h2::frame> before_the_waiting_call(raw_h2& c, Want want) {
  while (auto f = c.next(steady::now() + slack)) {
    if (f->stream == 3) return std::nullopt;
    if (want(*f)) return f;
  }
  return std::nullopt;
}

TEST(grpc_backend_wait, a_ping_and_settings_are_acknowledged_while_a_call_waits) {
  at_backend b;
  raw_h2 c(b.server.port());
  call_and_hold(b, c);
  c.settings_initial_window(1 << 20);
  c.ping("12345678");
  bool settings_acked = false;
  const auto pong = before_the_waiting_call(c, [&](const raw_h2::frame& f) {
    if (f.type == raw_h2::settings_frame && (f.flags & raw_h2::ack)) settings_acked = true;
    return f.type == raw_h2::ping_frame;
  });
  ASSERT_TRUE(pong) << "closed: " << c.closed();
  EXPECT_TRUE(pong->flags & raw_h2::ack);
  EXPECT_EQ(pong->payload, "12345678");
  EXPECT_TRUE(settings_acked) << "the PING's ACK came first: the SETTINGS were read before it";
  EXPECT_EQ(b.waiting_in_redis(), 1) << "the call is no longer waiting: nothing was shown";
  b.release();
  EXPECT_TRUE(c.next_of(3, raw_h2::headers_frame, steady::now() + slack)) << "never answered";
}

TEST(grpc_backend_wait, another_call_is_answered_while_a_call_waits) {
  at_backend b;
  raw_h2 c(b.server.port());
  call_and_hold(b, c);
  c.call(5, health_check);
  const auto answer = before_the_waiting_call(c, [](const raw_h2::frame& f) {
    return f.stream == 5 && f.type == raw_h2::headers_frame && (f.flags & raw_h2::end_stream);
  });
  ASSERT_TRUE(answer) << "closed: " << c.closed();
  EXPECT_EQ(b.waiting_in_redis(), 1);
}

// An answer that the client's window holds back goes out on its WINDOW_UPDATE.
TEST(grpc_backend_wait, a_window_update_lets_an_answer_out_while_a_call_waits) {
  at_backend b;
  raw_h2 c(b.server.port());
  call_and_hold(b, c);
  c.settings_initial_window(0);  // streams opened from now on get no window
  c.call(5, health_check);
  ASSERT_TRUE(before_the_waiting_call(
      c, [](const raw_h2::frame& f) { return f.stream == 5 && f.type == raw_h2::headers_frame; }))
      << "closed: " << c.closed();
  c.window_update(5, 64);
  const auto data = before_the_waiting_call(
      c, [](const raw_h2::frame& f) { return f.stream == 5 && f.type == raw_h2::data_frame; });
  ASSERT_TRUE(data) << "closed: " << c.closed();
  EXPECT_EQ(data->payload, std::string("\0\0\0\0\x02\x08\x01", 7)) << "SERVING";
  EXPECT_EQ(b.waiting_in_redis(), 1);
}

// Envoy resets a call after its filter timeout (20 ms by default): the reset is read while the
// call waits (the PING after it is acknowledged), so its decision counts it CANCELLED.
TEST(grpc_backend_wait, a_call_reset_while_it_waits_is_counted_cancelled) {
  at_backend b;
  raw_h2 c(b.server.port());
  call_and_hold(b, c);
  c.reset(3, cancel);
  c.ping("afterrst");
  ASSERT_TRUE(before_the_waiting_call(c,
                                      [](const raw_h2::frame& f) {
                                        return f.type == raw_h2::ping_frame &&
                                               (f.flags & raw_h2::ack);
                                      }))
      << "closed: " << c.closed();
  EXPECT_EQ(b.waiting_in_redis(), 1);
  EXPECT_EQ(b.metric(cancelled), 0) << "counted before its decision";
  b.release();
  EXPECT_EQ(b.until_metric(cancelled, 1), 1);
  // The connection serves on.
  c.call(5, health_check);
  EXPECT_TRUE(c.next_of(5, raw_h2::headers_frame, steady::now() + slack)) << c.closed();
}

// A client that closes its side while its call waits: the server closes the connection then,
// not once the call is decided, and the call counts CANCELLED when it is.
TEST(grpc_backend_wait, a_client_gone_while_its_call_waits_is_closed_at_once) {
  at_backend b;
  raw_h2 c(b.server.port());
  call_and_hold(b, c);
  c.half_close();
  EXPECT_FALSE(before_the_waiting_call(c, [](const raw_h2::frame&) { return false; }));
  EXPECT_TRUE(c.closed()) << "still open " << slack.count() << " s after the client's close";
  EXPECT_EQ(b.waiting_in_redis(), 1) << "closed only once the call was decided";
  b.release();
  EXPECT_EQ(b.until_metric(cancelled, 1), 1);
}

}  // namespace
}  // namespace floodgate::service::envoy
