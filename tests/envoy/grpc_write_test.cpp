// The gRPC server's writes: answers go to the socket at once when it takes them, and what it
// does not take waits for an asynchronous write, from where the first stopped. A raw HTTP/2
// client (raw_h2.hpp) pipelines calls whose answers are larger than the two sockets hold (both
// buffers made small), reads nothing until all are sent, then reads every frame back: each
// answer must arrive whole (its gRPC length prefix matching its DATA), every stream end with
// its trailers, and the connection still serve. The server runs in this process on the memory
// backend.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "envoy_config.hpp"
#include "envoy_config_parse.hpp"
#include "floodgate/limiter.hpp"
#include "grpc_server.hpp"
#include "raw_h2.hpp"
#include "rls_metrics.hpp"
#include "rls_service.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr std::string_view rls_method =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
// A slack for a loaded machine (every test at once, sanitizers) on top of what is waited for.
constexpr auto slack = 10s;

// RateLimitRequest {domain: "edge", descriptors: `n` x [{entries: [{key: "k", value: "v<i>"}]}]}:
// its answer holds `n` statuses (some twenty bytes each).
std::string wide_request(int n) {
  std::string out =
      "\x0a\x04"
      "edge";
  for (int i = 0; i < n; ++i) {
    const std::string value = "v" + std::to_string(i);
    std::string entry = "\x0a\x01k\x12";
    entry += static_cast<char>(value.size());
    entry += value;
    std::string descriptor = "\x0a";
    descriptor += static_cast<char>(entry.size());
    descriptor += entry;
    out += '\x12';
    out += static_cast<char>(descriptor.size());
    out += descriptor;
  }
  return out;
}

struct served {
  served() : server(options(), service, metrics) {}
  static grpc_options options() {
    grpc_options o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
    return o;
  }
  std::shared_ptr<floodgate::limiter> limiter = std::make_shared<floodgate::limiter>("memory://");
  envoy_config_store store{std::make_shared<const envoy_config>(config_text::parse(R"(
domain: edge
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
)"))};
  rls_metrics metrics;
  rls_service service{limiter, store, {}, &metrics};
  grpc_server server;
};

// The server's end of the client's connection `client_fd`, in this process (-1: none found).
int server_end_of(int client_fd) {
  sockaddr_in client{}, server{};
  socklen_t len = sizeof client;
  if (::getsockname(client_fd, reinterpret_cast<sockaddr*>(&client), &len) != 0) return -1;
  len = sizeof server;
  if (::getpeername(client_fd, reinterpret_cast<sockaddr*>(&server), &len) != 0) return -1;
  DIR* fds = ::opendir("/proc/self/fd");
  if (!fds) return -1;
  int found = -1;
  while (const dirent* e = ::readdir(fds)) {
    const int fd = std::atoi(e->d_name);
    if (fd == client_fd || e->d_name[0] == '.') continue;
    sockaddr_in local{}, peer{};
    socklen_t l = sizeof local, p = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &l) == 0 &&
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &p) == 0 &&
        local.sin_family == AF_INET && local.sin_port == server.sin_port &&
        peer.sin_port == client.sin_port) {
      found = fd;
      break;
    }
  }
  ::closedir(fds);
  return found;
}

std::uint32_t prefix_length(std::string_view message) {
  std::uint32_t n = 0;
  for (std::size_t i = 1; i < 5; ++i) n = (n << 8) | static_cast<std::uint8_t>(message[i]);
  return n;
}

// 20 calls of 200 descriptors: some 100 KB of answers against buffers of a few KiB each way, so
// the server's socket fills and its writes go on asynchronously. Their requests (2.5 KB each)
// stay within the server's connection window (65,535 bytes): the client reads nothing, so it
// sees no WINDOW_UPDATE until the end.
TEST(grpc_write, answers_larger_than_the_sockets_hold_arrive_whole_once_the_client_reads) {
  constexpr int calls = 20, descriptors = 200;
  served s;
  raw_h2 c(s.server.port(), 4096);
  c.start(1 << 24);                // a stream's window: no answer is held by flow control
  c.window_update(0, (1u << 30));  // nor by the connection's
  const auto request = wide_request(descriptors);
  // A first call, answered: the server's end is open by now. Its send buffer is then made small
  // (and no longer grows by itself), as a busy host's would be.
  c.call(1, rls_method, request);
  ASSERT_TRUE(c.next_of(1, raw_h2::headers_frame, steady::now() + slack));
  while (c.next(steady::now() + 100ms)) {
  }
  const int server_end = server_end_of(c.fd());
  ASSERT_GE(server_end, 0) << "the server's end of the connection was not found";
  const int send_buffer = 4096;
  ASSERT_EQ(::setsockopt(server_end, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer), 0);
  for (int i = 0; i < calls; ++i)
    c.call(static_cast<std::uint32_t>(2 * i + 3), rls_method, request);
  // Time for the server to answer them all and find its socket full.
  std::this_thread::sleep_for(300ms);
  std::map<std::uint32_t, std::string> messages;
  std::map<std::uint32_t, int> trailers;
  std::size_t bytes = 0;
  for (int ended = 0; ended < calls;) {
    const auto f = c.next(steady::now() + slack);
    ASSERT_TRUE(f) << "closed: " << c.closed() << ", " << ended << " calls ended";
    ASSERT_TRUE(f->stream == 0 ||
                (f->stream % 2 == 1 && f->stream > 1 && f->stream < 2 * calls + 3))
        << "a frame of stream " << f->stream << ": the bytes lost their place";
    if (f->type == raw_h2::data_frame) {
      messages[f->stream] += f->payload;
      bytes += f->payload.size();
    }
    if (f->type == raw_h2::headers_frame && (f->flags & raw_h2::end_stream) &&
        messages.contains(f->stream)) {
      ++trailers[f->stream];
      ++ended;
    }
    ASSERT_NE(f->type, raw_h2::rst_stream_frame) << "stream " << f->stream << " reset";
  }
  EXPECT_GT(bytes, std::size_t{64} * 1024) << "answers too small to fill the sockets";
  ASSERT_EQ(messages.size(), std::size_t{calls});
  for (const auto& [stream, m] : messages) {
    ASSERT_GE(m.size(), 5u) << "stream " << stream;
    EXPECT_EQ(prefix_length(m), m.size() - 5) << "stream " << stream << "'s answer is not whole";
    EXPECT_EQ(trailers[stream], 1) << "stream " << stream;
  }
  // The connection still serves.
  c.call(2 * calls + 3, rls_method, request);
  ASSERT_TRUE(c.next_of(2 * calls + 3, raw_h2::data_frame, steady::now() + slack))
      << "closed: " << c.closed();
}

}  // namespace
}  // namespace floodgate::service::envoy
