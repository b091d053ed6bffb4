// The one TU with Asio and Beast: listener, sessions, signals. Everything a request means is
// decided by the pure handler (route/render); this file only moves bytes and keeps deadlines.
#include "server/server.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <csignal>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "api/render.hpp"
#include "api/request_framing.hpp"
#include "config/runtime_overrides.hpp"
#include "logging/log_format.hpp"
#include "logging/log_throttle.hpp"
#include "server/peer_left.hpp"
#include "telemetry/observe.hpp"

namespace floodgate::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class session;

// A connection's socket and stream, bound to the io_context of the thread that serves it.
using session_executor = asio::io_context::executor_type;
using session_socket = asio::basic_stream_socket<tcp, session_executor>;
using session_stream = beast::basic_stream<tcp, session_executor>;

// Sent to connections over the cap, then closed: cheaper than a session, kinder than a reset.
constexpr std::string_view over_capacity_response =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 38\r\n"
    "Connection: close\r\n\r\n{\"error\": \"too many open connections\"}";
static_assert(std::string_view("{\"error\": \"too many open connections\"}").size() == 38);

constexpr std::string_view continue_response = "HTTP/1.1 100 Continue\r\n\r\n";

// After the last response, how long and how much we read and drop before closing: closing a
// socket with unread input sends a reset, which can destroy the response before the client
// reads it (nginx's lingering_close).
constexpr auto linger_time = 1s;
constexpr std::size_t linger_bytes = 4 << 20;

// At most one line a second for each kind of trouble that a client or a backend can repeat at
// will (log_throttle.hpp).
constexpr auto log_interval = 1s;

std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// The address a peer's connections are counted under: an IPv4-mapped IPv6 peer (a dual-stack
// listener) is the IPv4 address it is.
asio::ip::address peer_key(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}

// A connection cap that bit, for the throttled log line.
struct cap_event {
  connection_cap cap = connection_cap::global;
  cap_action action = cap_action::refused;
  asio::ip::address peer;
};

std::string_view to_string(connection_cap c) {
  return c == connection_cap::per_peer ? "per_peer" : "global";
}
std::string_view to_string(cap_action a) {
  return a == cap_action::closed_idle ? "closed_idle" : "refused";
}

}  // namespace

struct server::impl {
  impl(server_options o, std::shared_ptr<limiter> l, config_store& s, metrics& m,
       std::function<void()> reload)
      : options(std::move(o)),
        store(s),
        stats(m),
        on_reload(std::move(reload)),
        ios(make_contexts(options.threads)),
        acceptor(*ios.front()),
        admin_acceptor(*ios.front()),
        signals(*ios.front()),
        retry_timer(*ios.front()),
        admin_retry_timer(*ios.front()),
        drain_timer(*ios.front()),
        backend_log_timer(*ios.front()),
        cap_log_timer(*ios.front()),
        limiter(std::move(l)),
        leases(limiter->get_backend(), options.limits.max_key_size) {}

  static std::size_t thread_count(std::size_t wanted) {
    return wanted != 0 ? wanted
                       : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 2, 8);
  }
  static std::vector<std::unique_ptr<asio::io_context>> make_contexts(std::size_t wanted) {
    std::vector<std::unique_ptr<asio::io_context>> out;
    for (std::size_t i = thread_count(wanted); i > 0; --i) {
      out.push_back(std::make_unique<asio::io_context>(1));  // run by one thread each
      // A context's reactor (an epoll, an eventfd, a timerfd) is made when its first socket
      // is: make it now, while descriptors are plentiful. Made on its first connection, it
      // threw when descriptors had run out, and that ended the accept loop for good.
      tcp::socket make_reactor(*out.back());
    }
    return out;
  }

  void listen();
  void listen_on(tcp::acceptor& a, const std::string& host, std::uint16_t port,
                 std::string_view flag);
  void accept(tcp::acceptor& a);
  void retry_accept(tcp::acceptor& a);  // 100 ms later (out of descriptors, usually)
  void on_accept(tcp::acceptor& a, beast::error_code ec, session_socket socket);
  void reject(session_socket socket);
  void wait_for_signal();
  void begin_drain();
  void end_drain();
  void stop();
  void session_closed(session* s);
  void warn_backend_error(std::error_code ec);
  void note_cap(const cap_event& e);
  std::shared_ptr<session> admit(session_socket& socket, const asio::ip::address& peer, bool admin,
                                 std::vector<std::shared_ptr<session>>& evicted);
  session* longest_idle(const asio::ip::address* of_peer);
  void schedule_flush(asio::steady_timer& timer, std::chrono::steady_clock::time_point at,
                      void (impl::*flush)(bool));
  void flush_backend_log(bool stopping);
  void flush_cap_log(bool stopping);

  server_options options;
  config_store& store;
  metrics& stats;
  std::function<void()> on_reload;
  log_throttle<std::error_code> backend_log{log_interval};
  log_throttle<cap_event> cap_log{log_interval};

  // Sessions register here so a drain can reach them and the caps can count them. Declared
  // before the io_contexts: sessions still referenced by queued handlers die with them and
  // deregister on the way.
  struct registration {
    std::weak_ptr<session> self;
    asio::ip::address peer;  // peer_key()
    bool counted = true;     // false once claimed for eviction: its slot is already free
  };
  std::mutex sessions_mutex;
  std::unordered_map<session*, registration> sessions;
  // Under sessions_mutex: connections counted against the caps, in all and per peer.
  std::size_t counted = 0;
  std::unordered_map<asio::ip::address, std::size_t> per_peer;
  bool draining = false;  // under sessions_mutex
  bool stopped = false;   // under sessions_mutex: the I/O threads are gone, post nothing more

  // One io_context per I/O thread: a connection lives on one of them (round robin) and all its
  // work runs on that thread, so it needs no strand and no lock, and a memory-backend decision
  // completes inline. The listener, signals and drain timer live on the first.
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::size_t next_io = 0;  // the listener's: which context the next connection gets
  // Keeps the other contexts running while they have no connection; released by end_drain.
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> idle_guards;
  tcp::acceptor acceptor;
  tcp::acceptor admin_acceptor;  // open only with options.admin_handler
  asio::signal_set signals;
  asio::steady_timer retry_timer;
  asio::steady_timer admin_retry_timer;  // the admin acceptor's
  asio::steady_timer drain_timer;
  // On the first context: report what the log throttles held back when an incident ends.
  asio::steady_timer backend_log_timer;
  asio::steady_timer cap_log_timer;
  // Declared after the io_contexts, so destroyed before them: a backend destroyed with calls
  // in flight completes them (shutting_down), and their handlers post into a context still
  // alive.
  std::shared_ptr<floodgate::limiter> limiter;
  // One for the server's life, so an acquire that timed out is released once Redis answers
  // again (docs/algorithms.md, "Concurrency limits"); destroyed before the backend.
  semaphore leases;
};

namespace {

// The response's bytes, as Beast's serializer would write them (status line, Server, the
// handler's headers in order, Content-Length, Connection), into `out` (cleared first: a buffer
// reused from response to response). `version`: 10 or 11; `head`: a HEAD request's answer.
void serialize_response(const http_response& res, unsigned version, bool head, bool close_after,
                        std::string& out) {
  using namespace std::string_view_literals;
  out.clear();
  char num[24];
  auto append_number = [&](auto v) {
    const auto [end, ec] = std::to_chars(num, num + sizeof num, v);
    out.append(num, end);
  };
  out.append("HTTP/"sv);
  out += static_cast<char>('0' + version / 10 % 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
  out += ' ';
  append_number(res.status);
  out += ' ';
  out.append(http::obsolete_reason(static_cast<http::status>(res.status)));
  out.append("\r\nServer: floodgated\r\n"sv);
  for (const auto& [name, value] : res.headers)
    out.append(name).append(": "sv).append(value).append("\r\n"sv);
  // 204 and 304 carry neither a body nor Content-Length (RFC 9110); HEAD gets the length of
  // the body it does not get.
  const bool bodiless = res.status == 204 || res.status == 304;
  if (!bodiless) {
    out.append("Content-Length: "sv);
    append_number(res.body.size());
    out.append("\r\n"sv);
  }
  // HTTP/1.1 keeps a connection alive unless told; HTTP/1.0 closes it unless told.
  if (version >= 11 && close_after) out.append("Connection: close\r\n"sv);
  if (version < 11 && !close_after) out.append("Connection: keep-alive\r\n"sv);
  out.append("\r\n"sv);
  if (!bodiless && !head) out.append(res.body);
}

// One connection: read a request (with deadlines and caps), route it, ask the limiter, render,
// write, repeat. All its work runs on its io_context's one thread.
class session : public std::enable_shared_from_this<session> {
 public:
  session(session_socket socket, const asio::ip::address& peer, bool admin, server::impl& srv)
      : stream_(std::move(socket)), server_(srv), admin_(admin) {
    request_.peer_address = peer.to_string();
    // Unparsed bytes held at once: a header (the parser refuses more with 431) plus room for
    // the framing the parser can only take whole (a chunk-size line with its extensions, a
    // trailer line) and the start of a pipelined request. Without a maximum, a chunk line
    // that never ends grows the buffer for as long as the body deadline lets it.
    buffer_.max_size(server_.options.max_header_bytes + framing_slack);
    deadline_ = std::chrono::steady_clock::now() + server_.options.header_timeout;
    server_.stats.connection_opened();
  }

  ~session() {
    server_.stats.connection_closed();
    server_.session_closed(this);
  }

  void start() {
    asio::dispatch(stream_.get_executor(),
                   [self = shared_from_this()] { self->wait_for_request(); });
  }

  // Since when (steady ns) this connection has been idle between requests; 0 while it is not,
  // -1 once claimed for eviction. Read by the listener under sessions_mutex.
  std::int64_t idle_since() const noexcept { return idle_since_.load(std::memory_order_acquire); }
  // The listener's: marks an idle connection for closing (false if it just woke up), then
  // evict() closes it on its own thread.
  bool claim(std::int64_t seen) noexcept {
    return seen > 0 && idle_since_.compare_exchange_strong(seen, -1, std::memory_order_acq_rel);
  }
  void evict() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      spdlog::debug("msg=\"idle connection closed to make room\" peer={}",
                    quote(self->request_.peer_address));
      self->close();
    });
  }

  // SIGTERM: a connection waiting for (or reading) a request closes now; one whose request is
  // being decided or written finishes it and then closes.
  void drain() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->draining_ = true;
      if (self->phase_ == phase::reading) self->stream_.cancel();
    });
  }

 private:
  enum class phase { reading, deciding, writing, closing };
  static constexpr std::size_t framing_slack = 16 * 1024;

  void wait_for_request() {
    phase_ = phase::reading;
    if (draining_) return close();
    if (buffer_.size() > 0) {
      // A pipelined request is already here: its header deadline starts now, like any other's.
      deadline_ = std::chrono::steady_clock::now() + server_.options.header_timeout;
      return read_header();
    }
    // A new connection's header deadline runs from accept.
    if (first_request_) {
      stream_.expires_at(deadline_);
      stream_.async_read_some(buffer_.prepare(4096),
                              [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                self->on_first_bytes(ec, n);
                              });
      return;
    }
    // A kept-alive one idles first, under the lazy idle timer. (The read goes to the socket:
    // the stream would arm and cancel a timer of its own for every request.)
    const auto now = std::chrono::steady_clock::now();
    idle_deadline_ = now + server_.options.idle_timeout;
    if (!idle_timer_armed_) arm_idle_timer();
    idle_waiting_ = true;
    idle_since_.store(steady_ns(now), std::memory_order_release);
    stream_.socket().async_read_some(
        buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
          self->idle_waiting_ = false;
          // Claimed for eviction before these bytes were looked at: the server chose to close
          // an idle connection, and a client retries such a request on a new one (RFC 9112
          // 9.3.1), so it is not served here.
          if (self->idle_since_.exchange(0, std::memory_order_acq_rel) < 0) return self->close();
          self->on_first_bytes(ec, n);
        });
  }

  // The idle deadline moves with every request, the timer does not: when it fires early it
  // re-arms for the deadline then in force; when it fires during a request it lapses, and the
  // next idle wait arms it again. Why: a timer armed and cancelled per request (what the stream
  // does) costs two trips through the scheduler's timer queue for every request.
  void arm_idle_timer() {
    idle_timer_armed_ = true;
    idle_timer_.expires_at(idle_deadline_);
    idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      self->idle_timer_armed_ = false;
      if (ec || !self->idle_waiting_) return;
      if (std::chrono::steady_clock::now() < self->idle_deadline_) return self->arm_idle_timer();
      spdlog::debug("msg=\"connection timed out\" peer={}", quote(self->request_.peer_address));
      self->close();
    });
  }

  void on_first_bytes(beast::error_code ec, std::size_t n) {
    if (ec) return close_quietly(ec);
    buffer_.commit(n);
    if (!first_request_)
      deadline_ = std::chrono::steady_clock::now() + server_.options.header_timeout;
    read_header();
  }

  // Feeds the parser what is already buffered, up to the end of the header (or of the message,
  // with `whole`). need_more: the rest is still to be read. Why: a request usually arrives in
  // one segment, and parsing it here saves the async read's round through the scheduler.
  beast::error_code parse_buffered(bool whole) {
    beast::error_code ec;
    while (!(whole ? parser_->is_done() : parser_->is_header_done())) {
      if (buffer_.size() == 0) return http::error::need_more;
      buffer_.consume(parser_->put(buffer_.data(), ec));
      if (ec) return ec;
    }
    return ec;
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    const auto ec = parse_buffered(false);
    if (ec != http::error::need_more) return on_header(ec);
    stream_.expires_at(deadline_);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code rec, std::size_t) { self->on_header(rec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto& req = parser_->get();
    // Missing Host, or a body framed in a way we do not decode: refuse and close, since where
    // the next request starts is unknown.
    codings_.clear();
    if (req.count(http::field::transfer_encoding) > 0)
      for (const auto& f : req)
        if (f.name() == http::field::transfer_encoding) codings_.push_back(f.value());
    hosts_.clear();
    for (auto [it, end] = req.equal_range(http::field::host); it != end; ++it)
      hosts_.push_back(it->value());
    if (auto refusal = check_framing(req.version(), hosts_, codings_)) {
      version_ = req.version() < 11 ? 10 : 11;
      return respond(std::move(*refusal), true);
    }
    const bool has_body = parser_->chunked() || parser_->content_length().value_or(0) > 0;
    if (has_body && beast::iequals(req[http::field::expect], "100-continue")) {
      stream_.expires_after(server_.options.write_timeout);
      return asio::async_write(stream_, asio::buffer(continue_response),
                               [self = shared_from_this()](beast::error_code wec, std::size_t) {
                                 if (wec) return self->close_quietly(wec);
                                 self->read_body();
                               });
    }
    read_body();
  }

  void read_body() {
    parser_->eager(true);
    const auto ec = parse_buffered(true);
    if (!ec) return handle();
    if (ec != http::error::need_more) return on_read_error(ec);
    stream_.expires_after(server_.options.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code rec, std::size_t) {
                       if (rec) return self->on_read_error(rec);
                       self->handle();
                     });
  }

  void on_read_error(beast::error_code ec) {
    // The parser takes 1.0 and 1.1 only; the request is still in the buffer, unconsumed.
    if (ec == http::error::bad_version) {
      const auto bytes = buffer_.data();
      const auto v = reread_version({static_cast<const char*>(bytes.data()), bytes.size()});
      if (v.what == refused_version::verdict::serve_as_1_1) {
        static_cast<char*>(bytes.data())[v.minor_at] = '1';
        return read_header();
      }
      if (v.what == refused_version::verdict::not_supported)
        return respond(error_response(505,
                                      "HTTP version not supported: this server speaks "
                                      "HTTP/1.1 (and 1.0)"),
                       true);
    }
    if (ec == http::error::header_limit)
      return respond(error_response(431, "request headers too large"), true);
    if (ec == http::error::body_limit)
      return respond(error_response(413, "request body too large"), true);
    if (ec == http::error::buffer_overflow)
      return parser_->is_header_done()
                 ? respond(error_response(413, "request body too large: a chunk line or trailer "
                                               "beyond the buffer"),
                           true)
                 : respond(error_response(431, "request headers too large"), true);
    // A malformed request (including Content-Length with Transfer-Encoding): say so and close,
    // since where the next request would start is unknown.
    if (ec.category() == http::make_error_code(http::error::bad_version).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message)
      return respond(error_response(400, "malformed HTTP request: " + ec.message()), true);
    close_quietly(ec);  // timeout, client gone, drain
  }

  // The request as the handler sees it, in members reused from request to request (their
  // capacity stays: no allocation per request once warm).
  void convert_request() {
    auto& msg = parser_->get();
    request_.method.assign(msg.method_string());
    request_.target.assign(msg.target());
    std::size_t n = 0;
    for (const auto& field : msg) {
      if (n == request_.headers.size()) request_.headers.emplace_back();
      request_.headers[n].first.assign(field.name_string());
      request_.headers[n].second.assign(field.value());
      ++n;
    }
    request_.headers.resize(n);
    // An absolute-form target: routed as its path; its host replaces Host (RFC 9112 3.2.2,
    // 7.2), which the admin listener's Host check reads.
    if (!request_.target.starts_with('/'))
      if (auto abs = from_absolute_form(request_.target)) {
        bool had_host = false;
        for (auto& [name, value] : request_.headers)
          if (same_header_name(name, "Host")) {
            had_host = true;
            value.assign(abs->authority);
          }
        if (!had_host) request_.headers.emplace_back("Host", abs->authority);  // HTTP/1.0
        request_.target = std::move(abs->target);
      }
    request_.body = std::move(msg.body());
    head_ = msg.method() == http::verb::head;
    keep_alive_ = msg.keep_alive();
    version_ = msg.version();
  }

  void handle() {
    phase_ = phase::deciding;
    convert_request();
    if (admin_) return admin_call();
    auto routed = route(request_, server_.store.get(), server_.options.limits,
                        server_.options.live ? server_.options.live->current() : nullptr);
    if (auto* res = std::get_if<http_response>(&routed)) return respond(std::move(*res), false);
    if (auto* p = std::get_if<probe>(&routed)) return respond(answer(*p), false);

    // The plan lives in the session until rendered: one request at a time per connection.
    plan_ = std::move(std::get<check_plan>(routed));
    items_.clear();
    for (const auto& i : plan_.items) items_.push_back({i.key, &i.rule->policy, i.cost});
    started_ = std::chrono::steady_clock::now();
    // The handler holds the session through in_flight_ rather than a shared_ptr of its own: a
    // handler of one pointer fits std::function without an allocation. The backend calls it
    // exactly once.
    in_flight_ = shared_from_this();
    if (plan_.kind == check_plan::style::acquire || plan_.kind == check_plan::style::release ||
        plan_.kind == check_plan::style::renew)
      return lease_call();
    if (plan_.kind == check_plan::style::refund) return refund_call();
    check_call();
  }

  // /v1/check and /v1/auth: one check_all of the plan's items.
  void check_call() {
    server_.limiter->async_check_all(items_, [s = this](multi_check_result r) {
      // May run inline (memory backend: on this thread) or on a backend thread: count here,
      // render on the session's thread (dispatch: at once when already there, no hop).
      auto self = std::move(s->in_flight_);
      auto& srv = self->server_;
      observe_backend_call(srv.stats, self->plan_, r,
                           std::chrono::steady_clock::now() - self->started_);
      if (r.outcome == outcome::backend_error || r.local_mode) srv.warn_backend_error(r.error);
      auto executor = self->stream_.get_executor();
      asio::dispatch(executor,
                     [self = std::move(self), r = std::move(r)]() mutable { self->decided(r); });
    });
  }

  // /v1/refund: one item; the answer says what came back, and the state after the refund.
  void refund_call() {
    const auto& item = items_.front();
    server_.limiter->async_refund(
        item.key, *item.policy, item.cost, plan_.idempotency_key, [s = this](check_result r) {
          auto self = std::move(s->in_flight_);
          if (r.outcome == outcome::backend_error) self->server_.warn_backend_error(r.error);
          auto executor = self->stream_.get_executor();
          asio::dispatch(executor, [self = std::move(self), r = std::move(r)]() mutable {
            self->refunded(r);
          });
        });
  }

  void refunded(const check_result& r) {
    observe_refund(server_.stats, plan_, r);  // a refund is no decision
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("msg=\"refund\" peer={} rule={} key={} cost={} refunded={}{}{}",
                    quote(request_.peer_address), quote(plan_.items.front().rule->name()),
                    quote(plan_.items.front().key), plan_.items.front().cost, r.refunded,
                    r.replayed ? " replayed=true" : "",
                    r.error ? " error=" + quote(r.error.message()) : std::string());
    auto res = render_refund(r);
    plan_.rules.reset();  // the snapshot need not outlive the request
    respond(std::move(res), false);
  }

  // Everything on the admin listener: answered at once, or later from the key inspector.
  void admin_call() {
    in_flight_ = shared_from_this();
    server_.options.admin_handler(request_, [s = this](http_response res) {
      auto self = std::move(s->in_flight_);
      auto executor = self->stream_.get_executor();
      asio::dispatch(executor, [self = std::move(self), res = std::move(res)]() mutable {
        self->respond(std::move(res), false);
      });
    });
  }

  // /v1/acquire, /v1/release, /v1/renew: one semaphore call (no failure-mode decision for
  // release and renew: a lease that could not be ended ends by itself).
  void lease_call() {
    auto& sem = server_.leases;
    const auto& item = plan_.items.front();
    const auto& cp = *item.rule->concurrency;
    auto finish = [](session* s, auto r) {
      auto self = std::move(s->in_flight_);
      if (r.error && is_backend_error(r.error)) self->server_.warn_backend_error(r.error);
      observe_lease(self->server_.stats, self->plan_, r);
      auto executor = self->stream_.get_executor();
      asio::dispatch(executor, [self = std::move(self), r = std::move(r)]() mutable {
        http_response res;
        if constexpr (std::is_same_v<std::decay_t<decltype(r)>, acquire_result>) {
          if (!r.lease.empty() && !self->hand_out(r.lease)) return;
          res = render_acquire(self->plan_, r);
        } else {
          res = render_lease(self->plan_, r);
        }
        self->plan_.rules.reset();
        self->respond(std::move(res), false);
      });
    };
    if (plan_.kind == check_plan::style::acquire)
      return sem.async_acquire(item.key, cp,
                               [s = this, finish](acquire_result r) { finish(s, std::move(r)); });
    auto done = [s = this, finish](lease_result r) { finish(s, r); };
    if (plan_.kind == check_plan::style::release)
      sem.async_release(item.key, cp, plan_.lease, done);
    else
      sem.async_renew(item.key, cp, plan_.lease, done);
  }

  // A granted lease about to be written: the client alone will know its id, so until the
  // answer is written the session holds it, and gives it back if the connection ends first
  // (close). A client already gone gets nothing: false, the connection closed.
  bool hand_out(const std::string& lease) {
    const auto& item = plan_.items.front();
    unsent_lease_.emplace(unsent_lease{item.key, *item.rule->concurrency, lease});
    if (!peer_left(stream_.socket().native_handle())) return true;
    spdlog::debug("msg=\"client left before its lease was answered: released\" peer={} rule={}",
                  quote(request_.peer_address), quote(item.rule->name()));
    close();
    return false;
  }

  void decided(const multi_check_result& r) {
    if (!plan_.peek)  // a peek is no decision
      observe_decision(server_.stats, server_.options.top, plan_, r);
    const auto v = verdict_of(r);
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("msg=\"decision\" peer={} rule={} key={} items={} result={}{}",
                    quote(request_.peer_address), quote(plan_.items.front().rule->name()),
                    quote(plan_.items.front().key), plan_.items.size(), to_string(v),
                    r.error ? " error=" + quote(r.error.message()) : std::string());
    auto res = render(plan_, r);
    plan_.rules.reset();  // the snapshot need not outlive the request
    respond(std::move(res), false);
  }

  http_response answer(probe p) {
    switch (p) {
      case probe::healthz:
        return render_health();
      case probe::readyz: {
        auto& b = server_.limiter->get_backend();
        return render_ready(b.healthy(), b.kind());
      }
      case probe::healthcheck:
        return render_healthcheck(server_.limiter->get_backend().healthy());
      case probe::metrics:
        break;
    }
    return render_metrics(server_.stats.render());
  }

  void respond(http_response res, bool close_after) {
    phase_ = phase::writing;
    server_.stats.record_response(res.status);
    close_after = close_after || !keep_alive_ || draining_;
    serialize_response(res, version_, head_, close_after, out_);
    // Most responses fit the socket's buffer: write them at once, with no timer and no async
    // operation; only what does not fit waits, under the write deadline.
    beast::error_code ec;
    std::size_t sent = 0;
    if (stream_.socket().non_blocking() || (stream_.socket().non_blocking(true, ec), !ec))
      sent = stream_.socket().write_some(asio::buffer(out_), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again)
      return close_quietly(ec);
    if (sent == out_.size()) return written(close_after);
    stream_.expires_after(server_.options.write_timeout);
    asio::async_write(stream_, asio::buffer(out_) + sent,
                      [self = shared_from_this(), close_after](beast::error_code wec, std::size_t) {
                        if (wec) return self->close_quietly(wec);
                        self->written(close_after);
                      });
  }

  void written(bool close_after) {
    unsent_lease_.reset();  // the client has its lease now
    if (close_after) return linger();
    first_request_ = false;
    head_ = false;
    version_ = 11;
    keep_alive_ = true;
    // A pipelined request already buffered is served from a fresh handler, not deeper on this
    // stack (a client could pipeline many).
    if (buffer_.size() > 0)
      return asio::post(stream_.get_executor(),
                        [self = shared_from_this()] { self->wait_for_request(); });
    wait_for_request();
  }

  // Half-close, then drop what the client still sends until it closes or time runs out.
  void linger() {
    phase_ = phase::closing;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    stream_.expires_after(linger_time);
    scratch_ = std::make_unique<std::array<char, 16 * 1024>>();
    drop_input();
  }

  void drop_input() {
    stream_.async_read_some(asio::buffer(*scratch_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > linger_bytes) return self->close();
                              self->drop_input();
                            });
  }

  void close_quietly(beast::error_code ec) {
    if (ec && ec != beast::error::timeout && ec != http::error::end_of_stream &&
        ec != asio::error::operation_aborted && ec != asio::error::eof)
      spdlog::debug("msg=\"connection error\" peer={} error={}", quote(request_.peer_address),
                    quote(ec.message()));
    else if (ec == beast::error::timeout)
      spdlog::debug("msg=\"connection timed out\" peer={}", quote(request_.peer_address));
    close();
  }

  void close() {
    phase_ = phase::closing;
    if (unsent_lease_) {
      server_.leases.give_back(unsent_lease_->key, unsent_lease_->policy, unsent_lease_->id);
      unsent_lease_.reset();
    }
    idle_since_.store(0, std::memory_order_release);  // closing already: nothing to evict
    idle_timer_.cancel();                             // it holds the session alive
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  session_stream stream_;
  server::impl& server_;
  const bool admin_;  // accepted by the admin listener: only admin_handler answers
  asio::basic_waitable_timer<std::chrono::steady_clock,
                             asio::wait_traits<std::chrono::steady_clock>, session_executor>
      idle_timer_{stream_.get_executor()};
  std::chrono::steady_clock::time_point idle_deadline_;
  bool idle_timer_armed_ = false;
  bool idle_waiting_ = false;
  std::atomic<std::int64_t> idle_since_{0};  // see idle_since()
  std::vector<std::string_view> codings_;    // the current header's Transfer-Encoding lines
  std::vector<std::string_view> hosts_;      // ... and Host lines (one, valid, or a 400)
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http_request request_;           // the current request (peer_address: the connection's)
  check_plan plan_;                // the current request's check, until rendered
  std::vector<check_item> items_;  // plan_'s items as the limiter takes them
  std::chrono::steady_clock::time_point started_;  // when the backend was asked
  std::shared_ptr<session> in_flight_;             // this, while the backend decides (see handle)
  struct unsent_lease {
    std::string key;
    concurrency_policy policy;
    std::string id;
  };
  std::optional<unsent_lease> unsent_lease_;       // see hand_out
  std::string out_;                                // the response being written
  std::unique_ptr<std::array<char, 16 * 1024>> scratch_;  // linger's: only when closing
  std::size_t lingered_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  phase phase_ = phase::reading;
  bool first_request_ = true;
  bool draining_ = false;
  bool head_ = false;
  bool keep_alive_ = true;
  unsigned version_ = 11;
};

}  // namespace

void server::impl::listen() {
  listen_on(acceptor, options.host, options.port, "--listen");
  if (options.admin_handler)
    listen_on(admin_acceptor, options.admin_host, options.admin_port, "--admin-listen");
}

// `flag` names the listener in errors: with two, "Address already in use" alone does not say
// which (nor that --admin-listen may just repeat --listen).
void server::impl::listen_on(tcp::acceptor& a, const std::string& host, std::uint16_t port,
                             std::string_view flag) {
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  tcp::endpoint endpoint;
  if (!ec) {
    endpoint = {address, port};
  } else {
    tcp::resolver resolver(*ios.front());
    const auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || results.empty())
      throw std::runtime_error("cannot resolve listen host '" + host + "' (" + std::string(flag) +
                               "): " + (ec ? ec.message() : "no addresses"));
    endpoint = results.begin()->endpoint();
  }
  const auto where = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                     std::to_string(port);  // an IPv6 host in brackets
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + where + " (" + std::string(flag) +
                             "): " + ec.message());
}

void server::impl::accept(tcp::acceptor& a) {
  // Connections go to the I/O threads' contexts in turn.
  auto& context = *ios[next_io];
  next_io = (next_io + 1) % ios.size();
  try {
    a.async_accept(context, [this, &a](beast::error_code ec, session_socket socket) {
      on_accept(a, ec, std::move(socket));
    });
  } catch (const std::exception& e) {
    // Nothing here should throw (the reactors exist from the start); if something does, the
    // listener must not stop for good: try again as after a failed accept.
    spdlog::error("msg=\"cannot start an accept\" error={}", quote(e.what()));
    retry_accept(a);
  }
}

void server::impl::retry_accept(tcp::acceptor& a) {
  auto& timer = &a == &admin_acceptor ? admin_retry_timer : retry_timer;
  timer.expires_after(100ms);
  timer.async_wait([this, &a](beast::error_code wec) {
    if (!wec) accept(a);
  });
}

// Both acceptors live on the first context, so next_io needs no lock.
void server::impl::on_accept(tcp::acceptor& a, beast::error_code ec, session_socket socket) {
  if (ec == asio::error::operation_aborted || !a.is_open()) return;  // draining
  if (ec) {
    // Out of file descriptors, usually: back off instead of spinning.
    spdlog::warn("msg=\"accept failed\" error={}", quote(ec.message()));
    return retry_accept(a);
  }
  beast::error_code pec;
  const auto endpoint = socket.remote_endpoint(pec);
  if (pec) {  // already gone
    socket.close(pec);
    return accept(a);
  }
  const auto peer = peer_key(endpoint.address());
  std::vector<std::shared_ptr<session>> evicted;
  std::shared_ptr<session> s;
  {
    std::lock_guard lock(sessions_mutex);
    s = admit(socket, peer, &a == &admin_acceptor, evicted);
  }
  // Outside the lock: the last reference to a session may go here, and its destructor locks.
  for (auto& e : evicted) e->evict();
  evicted.clear();
  if (s)
    s->start();
  else
    reject(std::move(socket));
  accept(a);
}

// Under sessions_mutex: room for a connection from `peer`, closing the longest-idle keep-alive
// connection (the peer's own first, at the peer's cap; anyone's at the global cap) when a cap
// is reached. The new session, or null when it must be refused.
std::shared_ptr<session> server::impl::admit(session_socket& socket, const asio::ip::address& peer,
                                             bool admin,
                                             std::vector<std::shared_ptr<session>>& evicted) {
  auto make_room = [&](connection_cap cap) {
    session* victim = longest_idle(cap == connection_cap::per_peer ? &peer : nullptr);
    const auto action = victim ? cap_action::closed_idle : cap_action::refused;
    stats.record_connection_cap(cap, action);
    note_cap({cap, action, peer});
    if (!victim) return false;
    auto& r = sessions.at(victim);
    r.counted = false;
    --counted;
    if (--per_peer[r.peer] == 0) per_peer.erase(r.peer);
    if (auto v = r.self.lock()) evicted.push_back(std::move(v));
    return true;
  };
  if (const auto it = per_peer.find(peer); it != per_peer.end() &&
                                           it->second >= options.max_connections_per_peer &&
                                           !make_room(connection_cap::per_peer))
    return nullptr;
  if (counted >= options.max_connections && !make_room(connection_cap::global)) return nullptr;
  auto s = std::make_shared<session>(std::move(socket), peer, admin, *this);
  sessions.emplace(s.get(), registration{s, peer, true});
  ++counted;
  ++per_peer[peer];
  return s;
}

// Under sessions_mutex: the counted connection (of `of_peer`, or any) idle the longest, claimed
// for eviction; null if none is idle. A claim fails only when the connection woke up meanwhile:
// then look again.
session* server::impl::longest_idle(const asio::ip::address* of_peer) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    session* oldest = nullptr;
    std::int64_t oldest_since = 0;
    for (const auto& [ptr, r] : sessions) {
      if (!r.counted || (of_peer && r.peer != *of_peer)) continue;
      // The session is alive: its destructor deregisters under the lock we hold.
      const auto since = ptr->idle_since();
      if (since > 0 && (!oldest || since < oldest_since)) {
        oldest = ptr;
        oldest_since = since;
      }
    }
    if (!oldest) return nullptr;
    if (oldest->claim(oldest_since)) return oldest;
  }
  return nullptr;
}

void server::impl::reject(session_socket socket) {
  auto sock = std::make_shared<session_socket>(std::move(socket));
  asio::async_write(*sock, asio::buffer(over_capacity_response),
                    [sock](beast::error_code, std::size_t) {
                      beast::error_code ec;
                      sock->shutdown(tcp::socket::shutdown_both, ec);
                      sock->close(ec);
                    });
  stats.record_response(503);
}

void server::impl::wait_for_signal() {
  signals.async_wait([this](beast::error_code ec, int signo) {
    if (ec) return;  // cancelled: the drain is over
    if (signo == SIGHUP) {
      spdlog::info("msg=\"SIGHUP: reloading config\"");
      on_reload();
    } else if (signo == SIGTERM || signo == SIGINT) {
      bool again = false;
      {
        std::lock_guard lock(sessions_mutex);
        again = draining;
      }
      if (again) {
        spdlog::warn("msg=\"second stop signal: closing now\"");
        stop();
        return;
      }
      begin_drain();
    }
    wait_for_signal();
  });
}

void server::impl::begin_drain() {
  std::vector<std::shared_ptr<session>> open;
  {
    std::lock_guard lock(sessions_mutex);
    draining = true;
    for (auto& [ptr, r] : sessions)
      if (auto s = r.self.lock()) open.push_back(std::move(s));
  }
  spdlog::info("msg=\"draining\" open_connections={}", open.size());
  beast::error_code ec;
  acceptor.close(ec);
  admin_acceptor.close(ec);
  retry_timer.cancel();
  admin_retry_timer.cancel();
  for (auto& s : open) s->drain();
  open.clear();  // the last reference may be ours: session_closed then ends the drain
  if (options.on_drain) options.on_drain();

  drain_timer.expires_after(options.drain_timeout);
  drain_timer.async_wait([this](beast::error_code wec) {
    if (wec) return;
    spdlog::warn("msg=\"drain deadline passed; closing what is left\" open_connections={}",
                 stats.open_connections());
    stop();
  });
  std::lock_guard lock(sessions_mutex);
  if (sessions.empty()) asio::post(*ios.front(), [this] { end_drain(); });
}

// The drain is over: nothing keeps the I/O threads busy once these are gone.
void server::impl::end_drain() {
  signals.cancel();
  drain_timer.cancel();
  backend_log_timer.cancel();
  cap_log_timer.cancel();
  idle_guards.clear();
}

void server::impl::stop() {
  for (auto& context : ios) context->stop();
}

// Called from any thread (backend completions).
void server::impl::warn_backend_error(std::error_code ec) {
  const auto d = backend_log.on_event(std::chrono::steady_clock::now(), ec);
  if (d.log)
    spdlog::warn(
        "msg=\"backend error; rules apply their failure_mode\" error={} "
        "more_since_last_line={}",
        quote(ec.message()), d.suppressed);
  if (d.flush_at) schedule_flush(backend_log_timer, *d.flush_at, &impl::flush_backend_log);
}

void server::impl::flush_backend_log(bool stopping) {
  if (const auto s = backend_log.on_flush(std::chrono::steady_clock::now()))
    spdlog::warn("msg=\"backend errors not logged since the last line\" count={} last_error={}{}",
                 s->count, quote(s->last.message()), stopping ? " stopping=true" : "");
}

// On the listener's thread.
void server::impl::note_cap(const cap_event& e) {
  const auto d = cap_log.on_event(std::chrono::steady_clock::now(), e);
  if (d.log)
    spdlog::warn(
        "msg=\"connection cap reached\" cap={} action={} peer={} max_connections={} "
        "max_connections_per_peer={} more_since_last_line={}",
        to_string(e.cap), to_string(e.action), quote(e.peer.to_string()), options.max_connections,
        options.max_connections_per_peer, d.suppressed);
  if (d.flush_at) schedule_flush(cap_log_timer, *d.flush_at, &impl::flush_cap_log);
}

void server::impl::flush_cap_log(bool stopping) {
  if (const auto s = cap_log.on_flush(std::chrono::steady_clock::now()))
    spdlog::warn(
        "msg=\"connection caps reached, not logged since the last line\" count={} last_cap={} "
        "last_action={} last_peer={}{}",
        s->count, to_string(s->last.cap), to_string(s->last.action),
        quote(s->last.peer.to_string()), stopping ? " stopping=true" : "");
}

// Timers are not thread-safe: arm it on its own (the first) context. A cancelled wait (the
// drain is over) flushes at once, so no count is lost at exit.
void server::impl::schedule_flush(asio::steady_timer& timer,
                                  std::chrono::steady_clock::time_point at,
                                  void (impl::*flush)(bool)) {
  asio::post(*ios.front(), [this, &timer, at, flush] {
    timer.expires_at(at);
    timer.async_wait([this, flush](beast::error_code ec) { (this->*flush)(bool(ec)); });
  });
}

void server::impl::session_closed(session* s) {
  std::lock_guard lock(sessions_mutex);
  if (const auto it = sessions.find(s); it != sessions.end()) {
    if (it->second.counted) {
      --counted;
      if (--per_peer[it->second.peer] == 0) per_peer.erase(it->second.peer);
    }
    sessions.erase(it);
  }
  // The last connection of a drain: nothing keeps the I/O threads busy once these are gone.
  if (draining && sessions.empty() && !stopped) asio::post(*ios.front(), [this] { end_drain(); });
}

server::server(server_options options, std::shared_ptr<limiter> limiter, config_store& store,
               metrics& stats, std::function<void()> on_reload)
    : impl_(std::make_unique<impl>(std::move(options), std::move(limiter), store, stats,
                                   std::move(on_reload))) {}

server::~server() = default;

int server::run() {
  auto& s = *impl_;
  s.listen();
  s.signals.add(SIGTERM);
  s.signals.add(SIGINT);
  s.signals.add(SIGHUP);
  s.wait_for_signal();
  s.accept(s.acceptor);
  if (s.admin_acceptor.is_open()) s.accept(s.admin_acceptor);

  const std::size_t threads = s.ios.size();
  const auto bound = s.acceptor.local_endpoint();
  spdlog::info(
      "msg=\"listening\" address={} port={} threads={} max_connections={} "
      "max_connections_per_peer={} backend={}",
      quote(bound.address().to_string()), bound.port(), threads, s.options.max_connections,
      s.options.max_connections_per_peer, quote(s.limiter->get_backend().kind()));
  if (s.admin_acceptor.is_open()) {
    const auto admin = s.admin_acceptor.local_endpoint();
    spdlog::info("msg=\"admin listening\" address={} port={}", quote(admin.address().to_string()),
                 admin.port());
  }

  for (std::size_t i = 1; i < threads; ++i)
    s.idle_guards.push_back(asio::make_work_guard(*s.ios[i]));
  auto work = [&s](asio::io_context& context) {
    for (;;) {
      try {
        context.run();
        return;
      } catch (const std::exception& e) {
        // Nothing on the request path throws by design; if something does, keep serving.
        spdlog::error("msg=\"unexpected exception in an I/O thread\" error={}", quote(e.what()));
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i)
    pool.emplace_back([&work, &context = *s.ios[i]] { work(context); });
  work(*s.ios.front());
  for (auto& t : pool) t.join();
  {
    std::lock_guard lock(s.sessions_mutex);
    s.stopped = true;
  }
  spdlog::info("msg=\"stopped\"");
  return 0;
}

}  // namespace floodgate::service
