// The gRPC server against a client that does not take its answers through HTTP/2 flow control:
// a raw HTTP/2 client (frames written here by hand, as no library would misbehave on purpose)
// that advertises SETTINGS_INITIAL_WINDOW_SIZE = 0 and never sends a WINDOW_UPDATE. Its
// answers' headers go out, their messages never can. Before: the stream and the connection
// were held for as long as the client liked (the write timeout covered only a socket that took
// no bytes). The server runs in this process on the memory backend, with a short write timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "envoy_config.hpp"
#include "floodgate/limiter.hpp"
#include "grpc_server.hpp"
#include "raw_h2.hpp"
#include "rls_metrics.hpp"
#include "rls_service.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr auto data_frame = raw_h2::data_frame, headers_frame = raw_h2::headers_frame;
constexpr auto end_stream = raw_h2::end_stream;
constexpr std::string_view health_check = "/grpc.health.v1.Health/Check";

// floodgated's gRPC server on a free loopback port, the memory backend behind it.
struct served {
  explicit served(std::chrono::milliseconds write_timeout)
      : server(options(write_timeout), service, metrics) {}
  static grpc_options options(std::chrono::milliseconds write_timeout) {
    grpc_options o;
    o.address = "127.0.0.1:0";
    o.write_timeout = write_timeout;
    o.threads = 1;
    return o;
  }
  std::string metrics_text() const {
    std::string out;
    metrics.append(out);
    return out;
  }
  std::shared_ptr<floodgate::limiter> limiter = std::make_shared<floodgate::limiter>("memory://");
  envoy_config_store store{std::make_shared<const envoy_config>()};
  rls_metrics metrics;
  rls_service service{limiter, store, {}, &metrics};
  grpc_server server;
};

std::string flow_control_closes(const served& s) {
  const auto text = s.metrics_text();
  const std::string series = "floodgate_envoy_write_timeout_total{reason=\"flow_control\"} ";
  const auto at = text.find(series);
  if (at == std::string::npos) return "absent";
  const auto from = at + series.size();
  return text.substr(from, text.find('\n', from) - from);
}

// A slack for a loaded machine (every test at once, sanitizers) on top of what is waited for.
constexpr auto slack = 10s;

// A window of 0 for every stream, and a call on stream 1: whether its answer's headers came.
bool call_with_a_shut_window(raw_h2& c) {
  c.start(0);
  c.call(1, health_check);
  return c.next_of(1, headers_frame, steady::now() + slack).has_value();
}

// Its answer's headers come, its message cannot; the connection is closed once the answer has
// been held for the write timeout (at most twice it), and counted. Before: open for good.
TEST(grpc_flow_control, a_client_that_never_opens_its_window_is_closed_after_the_write_timeout) {
  constexpr auto write_timeout = 300ms;
  served s(write_timeout);
  raw_h2 c(s.server.port());
  // The server cannot hold the answer before the call is sent: the lower bound below counts
  // from here, not from when this thread saw the headers (late on a loaded machine).
  const auto called_at = steady::now();
  ASSERT_TRUE(call_with_a_shut_window(c)) << "the answer's headers are not flow-controlled";
  const auto held_from = steady::now();
  const auto data = c.next_of(1, data_frame, held_from + 2 * write_timeout + slack);
  EXPECT_FALSE(data) << "a message went through a zero window";
  EXPECT_TRUE(c.closed()) << "the connection is still open "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(
                                 steady::now() - held_from)
                                 .count()
                          << " ms after its answer was held";
  EXPECT_GE(steady::now() - called_at, write_timeout * 9 / 10) << "closed before the timeout";
  // By the watch's own deadline, not a later one's (the handshake's, 5 s: before, the timer
  // armed for it kept the watch waiting until then).
  EXPECT_LT(steady::now() - held_from, 4s);
  EXPECT_EQ(flow_control_closes(s), "1");
}

// A window opened late (after the watch began) lets the answer out: the connection stays, and
// answers a call made after the write timeout has passed.
TEST(grpc_flow_control, a_window_opened_in_time_lets_the_answer_out_and_keeps_the_connection) {
  constexpr auto write_timeout = 2s;
  served s(write_timeout);
  raw_h2 c(s.server.port());
  ASSERT_TRUE(call_with_a_shut_window(c));
  const auto held_from = steady::now();
  c.window_update(1, 64);
  const auto data = c.next_of(1, data_frame, held_from + slack);
  ASSERT_TRUE(data) << "closed: " << c.closed();
  EXPECT_EQ(data->payload, std::string("\0\0\0\0\x02\x08\x01", 7)) << "SERVING";
  // The watch fires (a write timeout after it began), finds nothing held, and lets it be.
  std::this_thread::sleep_until(held_from + write_timeout + 300ms);
  c.call(3, health_check);
  ASSERT_TRUE(c.next_of(3, headers_frame, steady::now() + slack)) << "closed: " << c.closed();
  c.window_update(3, 64);
  EXPECT_TRUE(c.next_of(3, data_frame, steady::now() + slack)) << "closed: " << c.closed();
  EXPECT_EQ(flow_control_closes(s), "0");
}

// The connection's window, not only a stream's: a client that lets the answers fill the
// connection's 65,535 bytes and opens it no more is closed the same way.
TEST(grpc_flow_control, a_client_that_never_opens_the_connection_window_is_closed_too) {
  constexpr auto write_timeout = 300ms;
  constexpr std::size_t window = 65535, answer_bytes = 7;  // a health answer: prefix + 2 bytes
  served s(write_timeout);
  raw_h2 c(s.server.port());
  c.start(1 << 20);  // a stream may take a MiB: the connection's window is what stops them
  std::size_t data_bytes = 0;
  std::uint32_t stream = 1;
  // Calls whose answers all fit, 50 at a time, each batch read to its last trailers.
  while (data_bytes + answer_bytes <= window) {
    const auto batch = std::min<std::size_t>(50, (window - data_bytes) / answer_bytes);
    for (std::size_t i = 0; i < batch; ++i, stream += 2) c.call(stream, health_check);
    for (std::size_t ended = 0; ended < batch;) {
      const auto f = c.next(steady::now() + slack);
      ASSERT_TRUE(f) << "closed or late with " << data_bytes << " bytes of answers taken";
      if (f->type == data_frame) data_bytes += f->payload.size();
      if (f->type == headers_frame && (f->flags & end_stream)) ++ended;
    }
  }
  EXPECT_EQ(data_bytes, window / answer_bytes * answer_bytes);
  const auto called_at = steady::now();  // the server holds the answer after this, never before
  c.call(stream, health_check);         // its answer does not fit
  const auto held_from = steady::now();
  while (c.next(held_from + 2 * write_timeout + slack)) {
  }
  EXPECT_TRUE(c.closed());
  EXPECT_GE(steady::now() - called_at, write_timeout * 9 / 10) << "closed before the timeout";
  EXPECT_EQ(flow_control_closes(s), "1");
}

}  // namespace
}  // namespace floodgate::service::envoy
