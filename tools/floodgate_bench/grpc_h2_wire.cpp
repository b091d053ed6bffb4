#include "grpc_h2_wire.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace floodgate::bench {
namespace {

std::string percent_decoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
      };
      const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

nghttp2_nv header(std::string_view name, std::string_view value, std::uint8_t flags) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), flags};
}

// Bounded by what a reply may be: the server's messages are small; a huge one is an error.
constexpr std::size_t max_reply_bytes = std::size_t{1} << 22;

}  // namespace

int connect_tcp(const endpoint& e, std::chrono::milliseconds timeout, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const auto port = std::to_string(e.port);
  if (int rc = ::getaddrinfo(e.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = "grpc: resolve " + e.host + ": " + ::gai_strerror(rc);
    return -1;
  }
  const timeval tv{static_cast<time_t>(timeout.count() / 1000),
                   static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  int fd = -1;
  for (auto* ai = found; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      error = "grpc: connect " + e.label() + ": " + std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool send_session_output(nghttp2_session* session, int fd, std::string& buffer,
                         std::string& error) {
  buffer.clear();
  while (true) {
    const std::uint8_t* data = nullptr;
    const auto n = nghttp2_session_mem_send(session, &data);
    if (n < 0) {
      error = std::string("grpc: http/2: ") + nghttp2_strerror(static_cast<int>(n));
      return false;
    }
    if (n == 0) break;
    buffer.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  for (std::size_t sent = 0; sent < buffer.size();) {
    const auto n = ::send(fd, buffer.data() + sent, buffer.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = std::string("grpc: send: ") + std::strerror(errno);
      return false;
    }
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

std::string frame_message(std::string_view message) {
  std::string framed(5, '\0');
  const auto len = static_cast<std::uint32_t>(message.size());
  for (int i = 0; i < 4; ++i) framed[1 + i] = static_cast<char>(len >> (24 - 8 * i));
  framed.append(message);
  return framed;
}

std::string grpc_timeout_value(std::chrono::milliseconds timeout) {
  return std::to_string(std::clamp<std::int64_t>(timeout.count(), 0, 99'999'999)) + "m";
}

std::array<nghttp2_nv, 7> request_headers(std::string_view path, std::string_view authority,
                                          std::string_view timeout_value) {
  constexpr std::uint8_t static_nv = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  return {
      header(":method", "POST", static_nv),
      header(":scheme", "http", static_nv),
      header(":path", path, NGHTTP2_NV_FLAG_NO_COPY_NAME),
      header(":authority", authority, NGHTTP2_NV_FLAG_NO_COPY_NAME),
      header("content-type", "application/grpc", static_nv),
      header("te", "trailers", static_nv),
      header("grpc-timeout", timeout_value, NGHTTP2_NV_FLAG_NO_COPY_NAME),
  };
}

void on_reply_header(grpc_reply& r, std::string_view name, std::string_view value) {
  if (name == "grpc-status") {
    int code = 0;
    for (char c : value) code = c >= '0' && c <= '9' && code < 1000 ? code * 10 + (c - '0') : 1000;
    r.grpc_status = code;
  } else if (name == "grpc-message") {
    r.grpc_message = percent_decoded(value);
  }
}

bool on_reply_data(grpc_reply& r, std::string_view data) {
  if (r.message.size() + data.size() > max_reply_bytes) return false;
  r.message.append(data);
  return true;
}

void finish_reply(grpc_reply& r, std::uint32_t reset_code) {
  if (r.grpc_status < 0 && r.transport_error.empty())
    r.transport_error = "grpc: the stream ended without grpc-status (http/2 error " +
                        std::to_string(reset_code) + ")";
  if (r.grpc_status != 0) return;
  const auto& m = r.message;
  const std::uint32_t want =
      m.size() >= 5
          ? (std::uint32_t(std::uint8_t(m[1])) << 24 | std::uint32_t(std::uint8_t(m[2])) << 16 |
             std::uint32_t(std::uint8_t(m[3])) << 8 | std::uint32_t(std::uint8_t(m[4])))
          : 0;
  if (m.size() < 5 || m[0] != 0 || want != m.size() - 5) {
    r.transport_error = "grpc: the answer is not one uncompressed message";
    r.grpc_status = -1;
  } else {
    r.message.erase(0, 5);
  }
}

}  // namespace floodgate::bench
