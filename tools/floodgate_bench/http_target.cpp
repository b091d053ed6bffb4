// The HTTP target: POST /v1/check to a running floodgated over one keep-alive connection per
// thread, blocking sockets with deadlines. 200 is allowed, 429 denied, anything else an error.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "endpoint.hpp"
#include "http_reply_reader.hpp"
#include "target.hpp"

namespace floodgate::bench {
namespace {

// Keys are the bench's own ("fgb-<run>-<n>"), but escape anyway: a JSON string must be valid.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + '"';
}

class http_target final : public target {
 public:
  http_target(endpoint e, std::string rule, std::chrono::milliseconds timeout)
      : endpoint_(std::move(e)), rule_(json_string(rule)), timeout_(timeout) {}
  ~http_target() override { disconnect(); }

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    const std::string body = "{\"rule\":" + rule_ + ",\"key\":" + json_string(key) +
                             ",\"cost\":" + std::to_string(cost) + "}";
    const std::string request =
        "POST /v1/check HTTP/1.1\r\nHost: " + endpoint_.label() +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    std::string error;
    // A kept-alive connection the server has since closed fails on first use: retry once on
    // a fresh one. (Had the lost attempt consumed, the record only misses an admission, which
    // can never inflate over_admitted.)
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = fd_ >= 0;
      if (!connected(error)) break;
      reader_.reset();
      if (exchange(request, error)) {
        if (!reader_.keep_alive()) disconnect();
        switch (reader_.status()) {
          case 200:
            return done({answer::verdict::allowed, {}});
          case 429:
            return done({answer::verdict::denied, {}});
          default:
            return done({answer::verdict::error, "http: status " +
                                                     std::to_string(reader_.status()) + ": " +
                                                     std::string(reader_.body().substr(0, 200))});
        }
      }
      disconnect();
      if (!reused) break;
    }
    done({answer::verdict::error, std::move(error)});
  }

 private:
  bool connected(std::string& error) {
    if (fd_ >= 0) return true;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const auto port = std::to_string(endpoint_.port);
    if (int rc = ::getaddrinfo(endpoint_.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      error = "http: resolve " + endpoint_.host + ": " + ::gai_strerror(rc);
      return false;
    }
    for (auto* ai = found; ai && fd_ < 0; ai = ai->ai_next) {
      fd_ = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd_ < 0) continue;
      set_deadlines();
      if (::connect(fd_, ai->ai_addr, ai->ai_addrlen) != 0) {
        error = "http: connect " + endpoint_.label() + ": " + std::strerror(errno);
        disconnect();
      }
    }
    ::freeaddrinfo(found);
    if (fd_ < 0) return false;
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return true;
  }

  void set_deadlines() {
    timeval tv{static_cast<time_t>(timeout_.count() / 1000),
               static_cast<suseconds_t>(timeout_.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  bool exchange(const std::string& request, std::string& error) {
    for (std::size_t sent = 0; sent < request.size();) {
      const auto n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = std::string("http: send: ") + std::strerror(errno);
        return false;
      }
      sent += static_cast<std::size_t>(n);
    }
    char buf[4096];
    while (true) {
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        error = errno == EAGAIN || errno == EWOULDBLOCK
                    ? "http: no answer within " + std::to_string(timeout_.count()) + " ms"
                    : std::string("http: recv: ") + std::strerror(errno);
        return false;
      }
      if (n == 0) {
        error = "http: connection closed by the server";
        return false;
      }
      switch (reader_.feed(std::string_view(buf, static_cast<std::size_t>(n)))) {
        case http_reply_reader::state::need_more:
          continue;
        case http_reply_reader::state::complete:
          return true;
        case http_reply_reader::state::error:
          error = "http: " + reader_.error();
          return false;
      }
    }
  }

  void disconnect() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  endpoint endpoint_;
  std::string rule_;  // already a JSON string
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  http_reply_reader reader_;
};

}  // namespace

target_maker make_http_target(const bench_options& opts) {
  auto e = parse_endpoint(opts.url, "http");
  if (!e) throw std::runtime_error("--http: cannot read host:port in '" + opts.url + "'");
  return [e = *e, rule = opts.rule, timeout = opts.timeout] {
    return std::make_unique<http_target>(e, rule, timeout);
  };
}

}  // namespace floodgate::bench
