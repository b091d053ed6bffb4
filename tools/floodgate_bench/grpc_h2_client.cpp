#include "grpc_h2_client.hpp"

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

int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
              std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
              void* user) {
  auto* s = *static_cast<state**>(user);
  if (!s || frame->hd.stream_id != s->id) return 0;
  s->answered = true;
  on_reply_header(*s->reply, {reinterpret_cast<const char*>(name), namelen},
                  {reinterpret_cast<const char*>(value), valuelen});
  return 0;
}

int on_data(nghttp2_session*, std::uint8_t, std::int32_t stream_id, const std::uint8_t* data,
            std::size_t len, void* user) {
  auto* s = *static_cast<state**>(user);
  if (!s || stream_id != s->id) return 0;
  s->answered = true;
  if (!on_reply_data(*s->reply, {reinterpret_cast<const char*>(data), len}))
    return NGHTTP2_ERR_CALLBACK_FAILURE;
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

}  // namespace

grpc_h2_client::grpc_h2_client(endpoint e, std::chrono::milliseconds timeout)
    : endpoint_(std::move(e)),
      authority_(endpoint_.label()),
      timeout_header_(grpc_timeout_value(timeout)),
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
  const std::string framed = frame_message(message);

  stream_state s;
  s.request = framed;
  s.reply = &reply;
  current_ = &s;
  struct clear_current {
    stream_state*& p;
    ~clear_current() { p = nullptr; }
  } clear{current_};

  const auto headers = request_headers(path, authority_, timeout_header_);
  nghttp2_data_provider body{};
  body.read_callback = read_request;
  s.id = nghttp2_submit_request(session_, nullptr, headers.data(), headers.size(), &body, nullptr);
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
  finish_reply(reply, s.reset_code);
  if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) disconnect();
  return true;
}

bool grpc_h2_client::flush(std::string& error) {
  return send_session_output(session_, fd_, out_, error);
}

bool grpc_h2_client::connect(std::string& error) {
  if (session_) return true;
  fd_ = connect_tcp(endpoint_, timeout_, error);
  if (fd_ < 0) return false;

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
