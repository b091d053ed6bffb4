// The one TU with Asio and Beast: listener, sessions, signals. Everything a request means is
// decided by the pure handler (route/render); this file only moves bytes and keeps deadlines.
#include "server.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <variant>

#include "log_format.hpp"

namespace floodgate::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class session;

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

}  // namespace

struct server::impl {
  impl(server_options o, std::shared_ptr<limiter> l, config_store& s, metrics& m,
       std::function<void()> reload)
      : options(std::move(o)),
        store(s),
        stats(m),
        on_reload(std::move(reload)),
        limiter(std::move(l)) {}

  void listen();
  void accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  void reject(tcp::socket socket);
  void wait_for_signal();
  void begin_drain();
  void session_closed(session* s);
  void warn_backend_error(std::error_code ec);

  server_options options;
  config_store& store;
  metrics& stats;
  std::function<void()> on_reload;
  // When a backend error was last logged (steady ms): at most one line a second.
  std::atomic<std::int64_t> backend_warned_at{std::numeric_limits<std::int64_t>::min() / 2};
  std::atomic<std::uint64_t> backend_errors_unlogged{0};

  // Sessions register here so a drain can reach them. Declared before io_context: sessions
  // still referenced by queued handlers die with it and deregister on the way.
  std::mutex sessions_mutex;
  std::unordered_map<session*, std::weak_ptr<session>> sessions;
  bool draining = false;  // under sessions_mutex
  bool stopped = false;   // under sessions_mutex: the I/O threads are gone, post nothing more

  asio::io_context io;
  // The listener, signals and drain timer share one strand.
  asio::strand<asio::io_context::executor_type> strand{asio::make_strand(io)};
  tcp::acceptor acceptor{strand};
  asio::signal_set signals{strand};
  asio::steady_timer retry_timer{strand};
  asio::steady_timer drain_timer{strand};
  // Declared after io_context, so destroyed before it: a backend destroyed with calls in
  // flight completes them (shutting_down), and their handlers post into a context still alive.
  std::shared_ptr<floodgate::limiter> limiter;
};

namespace {

// One connection: read a request (with deadlines and caps), route it, ask the limiter, render,
// write, repeat. All its work runs on its strand.
class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, server::impl& srv) : stream_(std::move(socket)), server_(srv) {
    beast::error_code ec;
    const auto peer = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = peer.address().to_string();
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

  void wait_for_request() {
    phase_ = phase::reading;
    if (draining_) return close();
    if (buffer_.size() > 0) return read_header();  // a pipelined request is already here
    // A new connection's header deadline runs from accept; a kept-alive one idles first.
    if (first_request_)
      stream_.expires_at(deadline_);
    else
      stream_.expires_after(server_.options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->on_first_bytes(ec, n);
                            });
  }

  void on_first_bytes(beast::error_code ec, std::size_t n) {
    if (ec) return close_quietly(ec);
    buffer_.commit(n);
    if (!first_request_)
      deadline_ = std::chrono::steady_clock::now() + server_.options.header_timeout;
    read_header();
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    stream_.expires_at(deadline_);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto& req = parser_->get();
    // A transfer coding other than chunked leaves the body's length unknown (RFC 9112 6.3):
    // refuse rather than guess where the next request starts.
    if (req.count(http::field::transfer_encoding) > 0 && !parser_->chunked())
      return respond(error_response(400, "unsupported Transfer-Encoding (only chunked)"), true);
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
    stream_.expires_after(server_.options.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->on_read_error(ec);
                       self->handle();
                     });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::header_limit)
      return respond(error_response(431, "request headers too large"), true);
    if (ec == http::error::body_limit)
      return respond(error_response(413, "request body too large"), true);
    // A malformed request (including Content-Length with Transfer-Encoding): say so and close,
    // since where the next request would start is unknown.
    if (ec.category() == http::make_error_code(http::error::bad_version).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message)
      return respond(error_response(400, "malformed HTTP request: " + ec.message()), true);
    close_quietly(ec);  // timeout, client gone, drain
  }

  void handle() {
    phase_ = phase::deciding;
    auto& msg = parser_->get();
    http_request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (const auto& field : msg)
      req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    req.body = std::move(msg.body());
    req.peer_address = peer_;
    head_ = msg.method() == http::verb::head;
    keep_alive_ = msg.keep_alive();
    version_ = msg.version();

    auto routed = route(req, server_.store.get(), server_.options.limits);
    if (auto* res = std::get_if<http_response>(&routed)) return respond(std::move(*res), false);
    if (auto* p = std::get_if<probe>(&routed)) return respond(answer(*p), false);

    auto plan = std::make_shared<check_plan>(std::move(std::get<check_plan>(routed)));
    const auto items = plan->check_items();
    const auto start = std::chrono::steady_clock::now();
    auto& stats = server_.stats;
    server_.limiter->async_check_all(
        items, [self = shared_from_this(), plan, start, &stats](multi_check_result r) {
          // May run inline or on a backend thread: count here, render on the strand.
          if (r.outcome != outcome::invalid_request)
            stats.record_backend_call(
                std::chrono::steady_clock::now() - start,
                r.outcome == outcome::backend_error ? r.error : std::error_code{});
          if (r.outcome == outcome::backend_error) self->server_.warn_backend_error(r.error);
          auto executor = self->stream_.get_executor();
          asio::post(executor, [self = std::move(self), plan = std::move(plan),
                                r = std::move(r)]() mutable { self->decided(*plan, r); });
        });
  }

  void decided(const check_plan& plan, const multi_check_result& r) {
    const auto v = verdict_of(r);
    for (const auto& item : plan.items) server_.stats.record_decision(item.rule->name(), v);
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("msg=\"decision\" peer={} rule={} key={} items={} result={}{}", quote(peer_),
                    quote(plan.items.front().rule->name()), quote(plan.items.front().key),
                    plan.items.size(), to_string(v),
                    r.error ? " error=" + quote(r.error.message()) : std::string());
    respond(render(plan, r), false);
  }

  http_response answer(probe p) {
    switch (p) {
      case probe::healthz:
        return render_health();
      case probe::readyz: {
        auto& b = server_.limiter->get_backend();
        return render_ready(b.healthy(), b.kind());
      }
      case probe::metrics:
        break;
    }
    return render_metrics(server_.stats.render());
  }

  void respond(http_response res, bool close_after) {
    phase_ = phase::writing;
    server_.stats.record_response(res.status);
    response_ = {};
    response_.version(version_);
    response_.result(static_cast<unsigned>(res.status));
    response_.set(http::field::server, "floodgated");
    for (auto& [name, value] : res.headers) response_.insert(name, value);
    // 204 and 304 carry neither a body nor Content-Length (RFC 9110); HEAD gets the length of
    // the body it does not get.
    const bool bodiless = res.status == 204 || res.status == 304;
    if (!bodiless) response_.content_length(res.body.size());
    if (!bodiless && !head_) response_.body() = std::move(res.body);
    close_after = close_after || !keep_alive_ || draining_;
    response_.keep_alive(!close_after);
    stream_.expires_after(server_.options.write_timeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this(), close_after](beast::error_code ec, std::size_t) {
                        if (ec) return self->close_quietly(ec);
                        if (close_after) return self->linger();
                        self->first_request_ = false;
                        self->head_ = false;
                        self->version_ = 11;
                        self->keep_alive_ = true;
                        self->wait_for_request();
                      });
  }

  // Half-close, then drop what the client still sends until it closes or time runs out.
  void linger() {
    phase_ = phase::closing;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    stream_.expires_after(linger_time);
    drop_input();
  }

  void drop_input() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > linger_bytes) return self->close();
                              self->drop_input();
                            });
  }

  void close_quietly(beast::error_code ec) {
    if (ec && ec != beast::error::timeout && ec != http::error::end_of_stream &&
        ec != asio::error::operation_aborted && ec != asio::error::eof)
      spdlog::debug("msg=\"connection error\" peer={} error={}", quote(peer_), quote(ec.message()));
    else if (ec == beast::error::timeout)
      spdlog::debug("msg=\"connection timed out\" peer={}", quote(peer_));
    close();
  }

  void close() {
    phase_ = phase::closing;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  server::impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::array<char, 16 * 1024> scratch_{};
  std::size_t lingered_ = 0;
  std::string peer_;
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
  beast::error_code ec;
  auto address = asio::ip::make_address(options.host, ec);
  tcp::endpoint endpoint;
  if (!ec) {
    endpoint = {address, options.port};
  } else {
    tcp::resolver resolver(io);
    const auto results =
        resolver.resolve(options.host, std::to_string(options.port), tcp::resolver::passive, ec);
    if (ec || results.empty())
      throw std::runtime_error("cannot resolve listen host '" + options.host +
                               "': " + (ec ? ec.message() : "no addresses"));
    endpoint = results.begin()->endpoint();
  }
  const auto where = options.host + ":" + std::to_string(options.port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": " + ec.message());
}

void server::impl::accept() {
  // Each connection gets its own strand.
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void server::impl::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;  // draining
  if (ec) {
    // Out of file descriptors, usually: back off instead of spinning.
    spdlog::warn("msg=\"accept failed\" error={}", quote(ec.message()));
    retry_timer.expires_after(100ms);
    retry_timer.async_wait([this](beast::error_code wec) {
      if (!wec) accept();
    });
    return;
  }
  if (static_cast<std::size_t>(stats.open_connections()) >= options.max_connections) {
    reject(std::move(socket));
  } else {
    auto s = std::make_shared<session>(std::move(socket), *this);
    {
      std::lock_guard lock(sessions_mutex);
      sessions.emplace(s.get(), s);
    }
    s->start();
  }
  accept();
}

void server::impl::reject(tcp::socket socket) {
  auto sock = std::make_shared<tcp::socket>(std::move(socket));
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
        io.stop();
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
    for (auto& [ptr, weak] : sessions)
      if (auto s = weak.lock()) open.push_back(std::move(s));
  }
  spdlog::info("msg=\"draining\" open_connections={}", open.size());
  beast::error_code ec;
  acceptor.close(ec);
  retry_timer.cancel();
  for (auto& s : open) s->drain();
  open.clear();  // the last reference may be ours: session_closed then ends the drain

  drain_timer.expires_after(options.drain_timeout);
  drain_timer.async_wait([this](beast::error_code wec) {
    if (wec) return;
    spdlog::warn("msg=\"drain deadline passed; closing what is left\" open_connections={}",
                 stats.open_connections());
    io.stop();
  });
  std::lock_guard lock(sessions_mutex);
  if (sessions.empty())
    asio::post(strand, [this] {
      signals.cancel();
      drain_timer.cancel();
    });
}

void server::impl::warn_backend_error(std::error_code ec) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  auto last = backend_warned_at.load(std::memory_order_relaxed);
  if (now - last < 1000 || !backend_warned_at.compare_exchange_strong(last, now)) {
    backend_errors_unlogged.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  spdlog::warn(
      "msg=\"backend error; rules apply their failure_mode\" error={} "
      "more_since_last_line={}",
      quote(ec.message()), backend_errors_unlogged.exchange(0));
}

void server::impl::session_closed(session* s) {
  std::lock_guard lock(sessions_mutex);
  sessions.erase(s);
  // The last connection of a drain: nothing keeps the I/O threads busy once these are gone.
  if (draining && sessions.empty() && !stopped)
    asio::post(strand, [this] {
      signals.cancel();
      drain_timer.cancel();
    });
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
  s.accept();

  std::size_t threads = s.options.threads;
  if (threads == 0) threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 2, 8);
  const auto bound = s.acceptor.local_endpoint();
  spdlog::info("msg=\"listening\" address={} port={} threads={} max_connections={} backend={}",
               quote(bound.address().to_string()), bound.port(), threads, s.options.max_connections,
               quote(s.limiter->get_backend().kind()));

  auto work = [&s] {
    for (;;) {
      try {
        s.io.run();
        return;
      } catch (const std::exception& e) {
        // Nothing on the request path throws by design; if something does, keep serving.
        spdlog::error("msg=\"unexpected exception in an I/O thread\" error={}", quote(e.what()));
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  {
    std::lock_guard lock(s.sessions_mutex);
    s.stopped = true;
  }
  spdlog::info("msg=\"stopped\"");
  return 0;
}

}  // namespace floodgate::service
