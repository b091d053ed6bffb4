#include "grpc_h2_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace floodgate::bench {

// What one call's stream has received so far; the session's callbacks fill it.
struct grpc_h2_client::stream_state {
  std::int32_t id = -1;
  std::string_view request;  // the framed message still to send
  grpc_reply* reply = nullptr;
  bool answered = false;  // any frame of the answer came (so the call must not be retried)
  bool closed = false;
  std::uint32_t reset_code = 0;  // RST_STREAM's (or REFUSED_STREAM after a GOAWAY)
};

namespace {

using state = grpc_h2_client::stream_state;

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

int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
              std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
              void* user) {
  auto* s = *static_cast<state**>(user);
  if (!s || frame->hd.stream_id != s->id) return 0;
  s->answered = true;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == "grpc-status") {
    int code = 0;
    for (char c : v) code = c >= '0' && c <= '9' && code < 1000 ? code * 10 + (c - '0') : 1000;
    s->reply->grpc_status = code;
  } else if (n == "grpc-message") {
    s->reply->grpc_message = percent_decoded(v);
  }
  return 0;
}

int on_data(nghttp2_session*, std::uint8_t, std::int32_t stream_id, const std::uint8_t* data,
            std::size_t len, void* user) {
  auto* s = *static_cast<state**>(user);
  if (!s || stream_id != s->id) return 0;
  s->answered = true;
  // Bounded by what a reply may be: the server's messages are small; a huge one is an error.
  if (s->reply->message.size() + len > (1u << 22)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  s->reply->message.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int on_close(nghttp2_session*, std::int32_t stream_id, std::uint32_t error_code, void* user) {
  auto* s = *static_cast<state**>(user);
  if (s && stream_id == s->id) {
    s->closed = true;
    s->reset_code = error_code;
  }
  return 0;
}

ssize_t read_request(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                     std::uint32_t* flags, nghttp2_data_source*, void* user) {
  auto* s = *static_cast<state**>(user);
  const auto n = std::min(length, s->request.size());
  std::memcpy(buf, s->request.data(), n);
  s->request.remove_prefix(n);
  if (s->request.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

nghttp2_nv header(std::string_view name, std::string_view value, std::uint8_t flags) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), flags};
}

}  // namespace

grpc_h2_client::grpc_h2_client(endpoint e, std::chrono::milliseconds timeout)
    : endpoint_(std::move(e)),
      authority_(endpoint_.host + ":" + std::to_string(endpoint_.port)),
      // grpc-timeout allows 8 digits.
      timeout_header_(std::to_string(std::min<std::int64_t>(timeout.count(), 99'999'999)) + "m"),
      timeout_(timeout) {}

grpc_h2_client::~grpc_h2_client() {
  disconnect();
}

grpc_reply grpc_h2_client::call(std::string_view path, std::string_view message) {
  grpc_reply reply;
  for (int attempt_no = 0; attempt_no < 2; ++attempt_no) {
    const bool reused = session_ != nullptr;
    reply = {};
    if (!connect(reply.transport_error)) break;
    if (attempt(path, message, reply)) return reply;
    disconnect();
    if (!reused) break;
  }
  return reply;
}

// One try on the current connection. False: the connection is unusable; the call may be
// retried on a new one when `reply` holds nothing of an answer.
bool grpc_h2_client::attempt(std::string_view path, std::string_view message, grpc_reply& reply) {
  std::string framed(5, '\0');
  const auto len = static_cast<std::uint32_t>(message.size());
  for (int i = 0; i < 4; ++i) framed[1 + i] = static_cast<char>(len >> (24 - 8 * i));
  framed.append(message);

  stream_state s;
  s.request = framed;
  s.reply = &reply;
  current_ = &s;
  struct clear_current {
    stream_state*& p;
    ~clear_current() { p = nullptr; }
  } clear{current_};

  constexpr std::uint8_t static_nv = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  const nghttp2_nv headers[] = {
      header(":method", "POST", static_nv),
      header(":scheme", "http", static_nv),
      header(":path", path, NGHTTP2_NV_FLAG_NO_COPY_NAME),
      header(":authority", authority_, NGHTTP2_NV_FLAG_NO_COPY_NAME),
      header("content-type", "application/grpc", static_nv),
      header("te", "trailers", static_nv),
      header("grpc-timeout", timeout_header_, NGHTTP2_NV_FLAG_NO_COPY_NAME),
  };
  nghttp2_data_provider body{};
  body.read_callback = read_request;
  s.id = nghttp2_submit_request(session_, nullptr, headers, std::size(headers), &body, nullptr);
  if (s.id < 0) {  // stream ids used up, or the server said GOAWAY: a new connection
    reply.transport_error = std::string("grpc: ") + nghttp2_strerror(s.id);
    return false;
  }
  if (!flush(reply.transport_error)) return false;

  char buf[16384];
  while (!s.closed) {
    const auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      reply.transport_error =
          n == 0 ? "grpc: connection closed by the server"
          : errno == EAGAIN || errno == EWOULDBLOCK
              ? "grpc: no answer within " + std::to_string(timeout_.count()) + " ms"
              : std::string("grpc: recv: ") + std::strerror(errno);
      if (s.answered) {
        reply.grpc_status = -1;
        disconnect();
        return true;  // part of an answer came: not retried
      }
      return false;
    }
    const auto fed = nghttp2_session_mem_recv(session_, reinterpret_cast<std::uint8_t*>(buf),
                                              static_cast<std::size_t>(n));
    if (fed < 0) {
      reply.transport_error =
          std::string("grpc: http/2: ") + nghttp2_strerror(static_cast<int>(fed));
      disconnect();
      return true;
    }
    if (!flush(reply.transport_error)) {
      if (s.closed) break;  // the answer is complete; the next call reconnects
      disconnect();
      return true;
    }
  }
  if (s.reset_code == NGHTTP2_REFUSED_STREAM && !s.answered) {
    reply.transport_error = "grpc: stream refused";
    return false;  // a GOAWAY: nothing was processed, retry on a new connection
  }
  if (reply.grpc_status < 0 && reply.transport_error.empty())
    reply.transport_error = "grpc: the stream ended without grpc-status (http/2 error " +
                            std::to_string(s.reset_code) + ")";
  if (reply.grpc_status == 0) {
    const auto& m = reply.message;
    const std::uint32_t want =
        m.size() >= 5
            ? (std::uint32_t(std::uint8_t(m[1])) << 24 | std::uint32_t(std::uint8_t(m[2])) << 16 |
               std::uint32_t(std::uint8_t(m[3])) << 8 | std::uint32_t(std::uint8_t(m[4])))
            : 0;
    if (m.size() < 5 || m[0] != 0 || want != m.size() - 5) {
      reply.transport_error = "grpc: the answer is not one uncompressed message";
      reply.grpc_status = -1;
    } else {
      reply.message.erase(0, 5);
    }
  }
  if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) disconnect();
  return true;
}

bool grpc_h2_client::flush(std::string& error) {
  out_.clear();
  while (true) {
    const std::uint8_t* data = nullptr;
    const auto n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      error = std::string("grpc: http/2: ") + nghttp2_strerror(static_cast<int>(n));
      return false;
    }
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  for (std::size_t sent = 0; sent < out_.size();) {
    const auto n = ::send(fd_, out_.data() + sent, out_.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = std::string("grpc: send: ") + std::strerror(errno);
      return false;
    }
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

bool grpc_h2_client::connect(std::string& error) {
  if (session_) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const auto port = std::to_string(endpoint_.port);
  std::string host = endpoint_.host;  // [v6] in the authority, bare for getaddrinfo
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = "grpc: resolve " + endpoint_.host + ": " + ::gai_strerror(rc);
    return false;
  }
  const timeval tv{static_cast<time_t>(timeout_.count() / 1000),
                   static_cast<suseconds_t>(timeout_.count() % 1000 * 1000)};
  for (auto* ai = found; ai && fd_ < 0; ai = ai->ai_next) {
    fd_ = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd_ < 0) continue;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd_, ai->ai_addr, ai->ai_addrlen) != 0) {
      error = "grpc: connect " + authority_ + ": " + std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd_ < 0) return false;
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
  const int rc = nghttp2_session_client_new(&session_, cbs, &current_);
  nghttp2_session_callbacks_del(cbs);
  if (rc != 0) throw std::bad_alloc();
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  // The preface and SETTINGS go with the first call's frames.
  return true;
}

void grpc_h2_client::disconnect() {
  if (session_) nghttp2_session_del(session_);
  session_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace floodgate::bench
