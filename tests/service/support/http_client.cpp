#include "http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace floodgate::test {

std::optional<std::string> http_reply::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (n.size() == name.size() && ::strncasecmp(n.data(), name.data(), n.size()) == 0) return v;
  return std::nullopt;
}

http_connection::http_connection(std::uint16_t port, const std::string& source_address,
                                 std::chrono::milliseconds timeout) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw std::runtime_error("http_connection: socket failed");
  if (source_address != "127.0.0.1") {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source_address.c_str(), &local.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      ::close(fd_);
      throw std::runtime_error("http_connection: cannot bind to " + source_address);
    }
  }
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    throw std::runtime_error("http_connection: cannot connect to port " + std::to_string(port));
  }
}

http_connection::~http_connection() {
  if (fd_ >= 0) ::close(fd_);
}

bool http_connection::send_raw(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool http_connection::fill() {
  char buf[16384];
  for (;;) {
    const auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<std::size_t>(n));
    return true;
  }
}

http_reply http_connection::read_reply(bool to_head) {
  http_reply reply;
  std::size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos)
    if (!fill()) return {};
  const std::string head = buffer_.substr(0, end + 2);
  buffer_.erase(0, end + 4);

  std::size_t pos = head.find("\r\n");
  const std::string status_line = head.substr(0, pos);
  if (status_line.size() < 12) return {};
  reply.status = std::stoi(status_line.substr(9, 3));
  pos += 2;
  while (pos < head.size()) {
    const auto eol = head.find("\r\n", pos);
    const auto line = head.substr(pos, eol - pos);
    pos = eol + 2;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    reply.headers.emplace_back(line.substr(0, colon), value);
  }
  if (reply.status / 100 == 1) return read_reply(to_head);  // 100 Continue: the real one follows

  if (to_head) return reply;
  if (const auto length = reply.header("Content-Length")) {
    const auto n = std::stoul(*length);
    while (buffer_.size() < n)
      if (!fill()) return {};
    reply.body = buffer_.substr(0, n);
    buffer_.erase(0, n);
  } else if (reply.status != 204 && reply.status != 304) {
    while (fill()) {
    }
    reply.body = std::move(buffer_);
    buffer_.clear();
  }
  return reply;
}

http_reply http_connection::request(
    std::string_view method, std::string_view target, std::string_view body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string req;
  req.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (const auto& [n, v] : headers) req.append(n).append(": ").append(v).append("\r\n");
  if (!body.empty() || method == "POST")
    req.append("Content-Type: application/json\r\nContent-Length: ")
        .append(std::to_string(body.size()))
        .append("\r\n");
  req.append("\r\n").append(body);
  if (!send_raw(req)) return {};
  return read_reply(method == "HEAD");
}

bool http_connection::closed_by_peer(std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    char buf[4096];
    const auto n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    // Data (a late response): keep waiting for the close.
  }
}

http_reply http_request_once(std::uint16_t port, std::string_view method, std::string_view target,
                             std::string_view body,
                             const std::vector<std::pair<std::string, std::string>>& headers) {
  http_connection c(port);
  return c.request(method, target, body, headers);
}

}  // namespace floodgate::test
