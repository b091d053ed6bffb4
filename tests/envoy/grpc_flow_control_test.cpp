// The gRPC server against a client that does not take its answers through HTTP/2 flow control:
// a raw HTTP/2 client (frames written here by hand, as no library would misbehave on purpose)
// that advertises SETTINGS_INITIAL_WINDOW_SIZE = 0 and never sends a WINDOW_UPDATE. Its
// answers' headers go out, their messages never can. Before: the stream and the connection
// were held for as long as the client liked (the write timeout covered only a socket that took
// no bytes). The server runs in this process on the memory backend, with a short write timeout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "envoy_config.hpp"
#include "floodgate/limiter.hpp"
#include "grpc_server.hpp"
#include "rls_metrics.hpp"
#include "rls_service.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr std::uint8_t data_frame = 0x0, headers_frame = 0x1, settings_frame = 0x4,
                       window_update_frame = 0x8;
constexpr std::uint8_t end_stream = 0x1, ack = 0x1, end_headers = 0x4;
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

// HTTP/2 by hand, on a blocking socket.
class raw_h2 {
 public:
  struct frame {
    std::uint8_t type = 0, flags = 0;
    std::uint32_t stream = 0;
    std::string payload;
  };

  explicit raw_h2(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("cannot connect to the gRPC port");
  }
  ~raw_h2() { ::close(fd_); }

  // The connection preface and SETTINGS with this INITIAL_WINDOW_SIZE.
  void start(std::uint32_t initial_window) {
    write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    std::string setting = {0x00, 0x04};  // SETTINGS_INITIAL_WINDOW_SIZE
    append32(setting, initial_window);
    send(settings_frame, 0, 0, setting);
  }

  // A unary call with an empty request message: HEADERS (HPACK literals, never indexed), then
  // the message's DATA ending the stream.
  void call(std::uint32_t stream, std::string_view path) {
    const std::pair<std::string_view, std::string_view> headers[] = {
        {":method", "POST"},       {":scheme", "http"},
        {":path", path},           {":authority", "localhost"},
        {"content-type", "application/grpc"}, {"te", "trailers"}};
    std::string block;
    for (const auto& [n, v] : headers) {
      block += '\x10';
      block += static_cast<char>(n.size());
      block += n;
      block += static_cast<char>(v.size());
      block += v;
    }
    send(headers_frame, end_headers, stream, block);
    send(data_frame, end_stream, stream, std::string(5, '\0'));
  }

  void window_update(std::uint32_t stream, std::uint32_t increment) {
    std::string p;
    append32(p, increment);
    send(window_update_frame, 0, stream, p);
  }

  // The next frame (the server's SETTINGS are acknowledged on the way), or none: the server
  // closed the connection (`closed_` set) or nothing came by `deadline`.
  std::optional<frame> next(steady::time_point deadline) {
    for (;;) {
      if (in_.size() >= 9) {
        const std::size_t size = (std::size_t(std::uint8_t(in_[0])) << 16) |
                                 (std::size_t(std::uint8_t(in_[1])) << 8) | std::uint8_t(in_[2]);
        if (in_.size() >= 9 + size) {
          frame f;
          f.type = static_cast<std::uint8_t>(in_[3]);
          f.flags = static_cast<std::uint8_t>(in_[4]);
          f.stream = ((std::uint32_t(std::uint8_t(in_[5])) << 24) |
                      (std::uint32_t(std::uint8_t(in_[6])) << 16) |
                      (std::uint32_t(std::uint8_t(in_[7])) << 8) | std::uint8_t(in_[8])) &
                     0x7fffffffu;
          f.payload = in_.substr(9, size);
          in_.erase(0, 9 + size);
          if (f.type == settings_frame && !(f.flags & ack)) send(settings_frame, ack, 0, "");
          return f;
        }
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return std::nullopt;
      }
      in_.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Frames of `stream` until one of `type` (none: closed or late).
  std::optional<frame> next_of(std::uint32_t stream, std::uint8_t type,
                               steady::time_point deadline) {
    while (auto f = next(deadline))
      if (f->stream == stream && f->type == type) return f;
    return std::nullopt;
  }

  bool closed() const noexcept { return closed_; }

 private:
  static void append32(std::string& s, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>(v >> shift);
  }
  void send(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, std::string_view payload) {
    std::string f;
    f += static_cast<char>(payload.size() >> 16);
    f += static_cast<char>(payload.size() >> 8);
    f += static_cast<char>(payload.size());
    f += static_cast<char>(type);
    f += static_cast<char>(flags);
    append32(f, stream);
    f += payload;
    write(f);
  }
  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send failed");
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  int fd_;
  std::string in_;
  bool closed_ = false;
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
