#include "grpc_h2_mux.hpp"

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace floodgate::bench {
namespace {

using clock = std::chrono::steady_clock;

struct pending_call {
  std::string path;
  std::string framed;  // the request message, prefixed
  std::size_t sent = 0;
  grpc_reply reply;
  grpc_h2_mux::on_reply done;
  clock::time_point deadline;
  bool answered = false;  // some of the answer came: never sent again
  bool retried = false;   // sent again once, its first stream refused (a GOAWAY)
};

using call_ptr = std::unique_ptr<pending_call>;

}  // namespace

struct grpc_h2_mux::impl {
  impl(endpoint e, std::chrono::milliseconds t)
      : target(std::move(e)),
        authority(target.label()),
        timeout_value(grpc_timeout_value(t)),
        timeout(t),
        wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake < 0) throw std::runtime_error(std::string("grpc: eventfd: ") + std::strerror(errno));
    thread = std::thread([this] { run(); });
  }

  ~impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    poke();
    thread.join();
    ::close(wake);
  }

  void call(std::string_view path, std::string_view message, on_reply done) {
    auto c = std::make_unique<pending_call>();
    c->path.assign(path);
    c->framed = frame_message(message);
    c->done = std::move(done);
    c->deadline = clock::now() + timeout;
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(c));
    }
    // From a completion the loop sends it after this read's completions: no wake-up needed.
    if (std::this_thread::get_id() != thread.get_id()) poke();
  }

  void poke() const {
    const std::uint64_t one = 1;
    (void)!::write(wake, &one, sizeof one);
  }

  void run() {
    std::deque<call_ptr> queued;
    for (;;) {
      {
        std::lock_guard lock(mutex);
        queued.swap(queue);
        if (stopping && queued.empty() && in_flight.empty()) break;
      }
      submit(queued);
      if (session) {
        std::string error;
        if (!send_session_output(session, fd, out, error)) disconnect(error);
      }
      complete();
      int wait_ms = -1;
      if (!in_flight.empty()) {
        auto first = clock::time_point::max();
        for (const auto& [id, c] : in_flight) first = std::min(first, c->deadline);
        wait_ms = static_cast<int>(std::max<std::int64_t>(
            0, std::chrono::ceil<std::chrono::milliseconds>(first - clock::now()).count()));
      }
      {
        std::lock_guard lock(mutex);
        if (!queue.empty()) wait_ms = 0;  // queued by a completion: send it first
      }
      pollfd fds[2] = {{wake, POLLIN, 0}, {fd, POLLIN, 0}};
      const int n = ::poll(fds, fd >= 0 ? 2 : 1, wait_ms);
      if (n > 0 && fds[0].revents) {
        std::uint64_t count = 0;
        (void)!::read(wake, &count, sizeof count);
      }
      if (n > 0 && fd >= 0 && fds[1].revents) receive();
      expire(clock::now());
      complete();
    }
    disconnect("grpc: closed");
  }

  // Starts the queued calls on the connection (connecting first if need be).
  void submit(std::deque<call_ptr>& queued) {
    if (queued.empty()) return;
    std::string error;
    if (!session && !connect(error)) {
      for (auto& c : queued) fail(std::move(c), error);
      queued.clear();
      return;
    }
    for (auto& c : queued) {
      const auto headers = request_headers(c->path, authority, timeout_value);
      nghttp2_data_provider body{};
      body.source.ptr = c.get();
      body.read_callback = &impl::read_request;
      const auto id =
          nghttp2_submit_request(session, nullptr, headers.data(), headers.size(), &body, c.get());
      if (id < 0) {  // stream ids used up, or the server said GOAWAY
        fail(std::move(c), std::string("grpc: ") + nghttp2_strerror(id));
        continue;
      }
      in_flight.emplace(id, std::move(c));
    }
    queued.clear();
  }

  bool connect(std::string& error) {
    fd = connect_tcp(target, timeout, error);
    if (fd < 0) return false;
    nghttp2_session_callbacks* cbs = nullptr;
    if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
    nghttp2_session_callbacks_set_on_header_callback(cbs, &impl::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &impl::on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &impl::on_close);
    const int rc = nghttp2_session_client_new(&session, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    if (rc != 0) throw std::bad_alloc();
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    return true;
  }

  // Every call in flight fails with `why`; the next call connects again.
  void disconnect(const std::string& why) {
    if (session) nghttp2_session_del(session);  // calls no callback
    session = nullptr;
    if (fd >= 0) ::close(fd);
    fd = -1;
    for (auto& [id, c] : in_flight) fail(std::move(c), why);
    in_flight.clear();
  }

  void fail(call_ptr c, const std::string& why) {
    c->reply.transport_error = why;
    c->reply.grpc_status = -1;
    finished.push_back(std::move(c));
  }

  void receive() {
    char buf[16384];
    for (;;) {
      const auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0)
        return disconnect(n == 0 ? "grpc: connection closed by the server"
                                 : std::string("grpc: recv: ") + std::strerror(errno));
      const auto fed = nghttp2_session_mem_recv(session, reinterpret_cast<std::uint8_t*>(buf),
                                                static_cast<std::size_t>(n));
      if (fed < 0)
        return disconnect(std::string("grpc: http/2: ") + nghttp2_strerror(static_cast<int>(fed)));
      if (static_cast<std::size_t>(n) < sizeof buf) break;
    }
    if (!nghttp2_session_want_read(session) && !nghttp2_session_want_write(session))
      disconnect("grpc: the server ended the connection");
  }

  void expire(clock::time_point now) {
    for (const auto& [id, c] : in_flight)
      if (c->deadline <= now)
        return disconnect("grpc: no answer within " + std::to_string(timeout.count()) + " ms");
  }

  // The finished calls' completions, which may call again.
  void complete() {
    while (!finished.empty()) {
      std::vector<call_ptr> batch;
      batch.swap(finished);
      for (auto& c : batch) c->done(std::move(c->reply));
    }
  }

  static impl& self(void* user) { return *static_cast<impl*>(user); }
  static pending_call* call_of(nghttp2_session* s, std::int32_t id) {
    return static_cast<pending_call*>(nghttp2_session_get_stream_user_data(s, id));
  }

  static int on_header(nghttp2_session* s, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t, void*) {
    auto* c = call_of(s, frame->hd.stream_id);
    if (!c) return 0;
    c->answered = true;
    on_reply_header(c->reply, {reinterpret_cast<const char*>(name), namelen},
                    {reinterpret_cast<const char*>(value), valuelen});
    return 0;
  }

  static int on_data(nghttp2_session* s, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                     std::size_t len, void*) {
    auto* c = call_of(s, id);
    if (!c) return 0;
    c->answered = true;
    if (!on_reply_data(c->reply, {reinterpret_cast<const char*>(data), len}))
      nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    return 0;
  }

  static int on_close(nghttp2_session*, std::int32_t id, std::uint32_t error_code, void* user) {
    auto& me = self(user);
    auto node = me.in_flight.extract(id);
    if (node.empty()) return 0;
    auto c = std::move(node.mapped());
    if (error_code == NGHTTP2_REFUSED_STREAM && !c->answered && !c->retried) {
      // Refused unprocessed (a GOAWAY's streams): sent again, once, on this or a new connection.
      c->retried = true;
      c->sent = 0;
      c->reply = {};
      std::lock_guard lock(me.mutex);
      me.queue.push_front(std::move(c));
      return 0;
    }
    finish_reply(c->reply, error_code);
    me.finished.push_back(std::move(c));
    return 0;
  }

  static ssize_t read_request(nghttp2_session*, std::int32_t, std::uint8_t* buf,
                              std::size_t length, std::uint32_t* flags,
                              nghttp2_data_source* source, void*) {
    auto* c = static_cast<pending_call*>(source->ptr);
    const auto n = std::min(length, c->framed.size() - c->sent);
    std::memcpy(buf, c->framed.data() + c->sent, n);
    c->sent += n;
    if (c->sent == c->framed.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  const endpoint target;
  const std::string authority;
  const std::string timeout_value;
  const std::chrono::milliseconds timeout;
  const int wake;  // eventfd: a call queued from another thread, or the end

  std::mutex mutex;
  std::deque<call_ptr> queue;  // under mutex: calls to start
  bool stopping = false;       // under mutex

  // The I/O thread's alone.
  int fd = -1;
  nghttp2_session* session = nullptr;
  std::unordered_map<std::int32_t, call_ptr> in_flight;
  std::vector<call_ptr> finished;  // answered or failed, their completions not run yet
  std::string out;
  std::thread thread;  // last: it starts once the rest is built
};

grpc_h2_mux::grpc_h2_mux(endpoint e, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(std::move(e), timeout)) {}

grpc_h2_mux::~grpc_h2_mux() = default;

void grpc_h2_mux::call(std::string_view path, std::string_view message, on_reply done) {
  impl_->call(path, message, std::move(done));
}

}  // namespace floodgate::bench
