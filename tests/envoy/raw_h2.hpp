// A raw HTTP/2 client for the gRPC server's tests: frames written here by hand, as no library
// would misbehave on purpose (never open a window, reset a call, half-close mid-call).
//
//   raw_h2 c(server.port());
//   c.start(65535);                        // preface and SETTINGS_INITIAL_WINDOW_SIZE
//   c.call(1, "/grpc.health.v1.Health/Check");
//   auto trailers = c.next_of(1, raw_h2::headers_frame, deadline);
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate::service::envoy {

// HTTP/2 by hand, on a blocking socket.
class raw_h2 {
 public:
  using steady = std::chrono::steady_clock;
  static constexpr std::uint8_t data_frame = 0x0, headers_frame = 0x1, rst_stream_frame = 0x3,
                                settings_frame = 0x4, ping_frame = 0x6, window_update_frame = 0x8;
  static constexpr std::uint8_t end_stream = 0x1, ack = 0x1, end_headers = 0x4;
  struct frame {
    std::uint8_t type = 0, flags = 0;
    std::uint32_t stream = 0;
    std::string payload;
  };

  // `receive_buffer` (bytes, 0: the system's): SO_RCVBUF, set before connecting, so that a
  // client that does not read soon fills the server's socket.
  explicit raw_h2(int port, int receive_buffer = 0)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ >= 0 && receive_buffer > 0)
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
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
    settings_initial_window(initial_window);
  }

  // A unary call with `message` (empty by default): HEADERS (HPACK literals, never indexed), then
  // the message's DATA ending the stream.
  void call(std::uint32_t stream, std::string_view path, std::string_view message = {}) {
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
    std::string data(1, '\0');  // not compressed
    append32(data, static_cast<std::uint32_t>(message.size()));
    data += message;
    send(data_frame, end_stream, stream, data);
  }

  void settings_initial_window(std::uint32_t initial_window) {
    std::string setting = {0x00, 0x04};  // SETTINGS_INITIAL_WINDOW_SIZE
    append32(setting, initial_window);
    send(settings_frame, 0, 0, setting);
  }

  void ping(std::string_view opaque_8_bytes) { send(ping_frame, 0, 0, opaque_8_bytes); }

  void reset(std::uint32_t stream, std::uint32_t error_code) {
    std::string p;
    append32(p, error_code);
    send(rst_stream_frame, 0, stream, p);
  }

  // Sends nothing more (FIN); frames can still be read.
  void half_close() { ::shutdown(fd_, SHUT_WR); }

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
  int fd() const noexcept { return fd_; }

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

}  // namespace floodgate::service::envoy
