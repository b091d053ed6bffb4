#include "grpc_connection.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "rls_metrics.hpp"
#include "rls_proto.hpp"
#include "rls_service.hpp"

namespace floodgate::service::envoy {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using steady = std::chrono::steady_clock;

constexpr std::string_view rls_method =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view health_check_method = "/grpc.health.v1.Health/Check";
constexpr std::string_view rls_service_name = "envoy.service.ratelimit.v3.RateLimitService";
constexpr std::string_view upstream_service_name = "ratelimit";  // envoyproxy/ratelimit's
constexpr std::size_t read_chunk_bytes = 16 * 1024;
constexpr std::size_t write_batch_bytes = 64 * 1024;
// Ended calls' map nodes kept for new ones, as h2_session keeps its streams'.
constexpr std::size_t spare_calls = 16;
// A parsed request's descriptors whose memory a connection keeps for the next one.
constexpr std::size_t kept_descriptors = 16;

grpc_status status_of(rls_result::kind k) {
  switch (k) {
    case rls_result::kind::ok:
      return grpc_status::ok;
    case rls_result::kind::invalid_argument:
      return grpc_status::invalid_argument;
    case rls_result::kind::deadline_exceeded:
      return grpc_status::deadline_exceeded;
    case rls_result::kind::unavailable:
      return grpc_status::unavailable;
  }
  return grpc_status::internal;
}

grpc_code_class class_of(rls_result::kind k) {
  switch (k) {
    case rls_result::kind::ok:
      return grpc_code_class::ok;
    case rls_result::kind::invalid_argument:
      return grpc_code_class::invalid_argument;
    case rls_result::kind::deadline_exceeded:
      return grpc_code_class::deadline_exceeded;
    case rls_result::kind::unavailable:
      return grpc_code_class::unavailable;
  }
  return grpc_code_class::other;
}

template <class Stream>
class connection final : public grpc_connection,
                         public h2_session::events,
                         public std::enable_shared_from_this<connection<Stream>> {
 public:
  connection(asio::io_context& io, Stream stream, std::string peer, grpc_shared& shared)
      : io_(io),
        stream_(std::move(stream)),
        timer_(io),
        peer_(std::move(peer)),
        s_(shared),
        session_(*this, shared.limits) {}

  void start() {
    bool joined = false;
    {
      // Under the lock that the shutdown's snapshots take: a connection is either in them all,
      // or sees the shutdown and closes (none is left holding an I/O thread).
      std::lock_guard lock(s_.live_mutex);
      if (!s_.stopping) joined = s_.live.emplace(this, this->weak_from_this()).second;
    }
    if (!joined) {
      closed_ = true;
      error_code ignored;
      stream_.lowest_layer().close(ignored);
      return;
    }
    arm(steady::now() + s_.handshake_timeout);
    if constexpr (tls) {
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](const error_code& ec) {
                                if (self->closed_) return;
                                if (ec) {
                                  self->note_tls_failure(ec.message());
                                  return self->shut();
                                }
                                self->handshaken_ = true;
                                self->read();
                                self->flush();
                              });
    } else {
      handshaken_ = true;
      read();
      flush();
    }
  }

  void go_away() override {
    asio::post(io_, [self = this->shared_from_this()] {
      if (self->closed_) return;
      self->draining_ = true;
      self->session_.go_away();
      self->flush();
    });
  }

  void close() override {
    asio::post(io_, [self = this->shared_from_this()] { self->shut(); });
  }

  void end_waiting(std::int32_t stream, grpc_status status, const char* message) override {
    asio::post(io_, [self = this->shared_from_this(), stream, status, message] {
      const auto it = self->calls_.find(stream);
      if (it == self->calls_.end() || it->second.state == call_state::deciding) return;
      self->end_call(it);
      self->session_.fail(stream, status, message);
      self->flush();
    });
  }

  // h2_session::events: on this thread, inside session_.receive().
  // A call's headers. It joins the stream guard at the end of this read (admit_fresh) unless
  // its message came in the same read, as Envoy's do: such a call never waits for it.
  void on_call(std::int32_t stream, std::string_view path,
               std::optional<std::chrono::nanoseconds> timeout) override {
    const auto k = path == rls_method            ? kind::rls
                   : path == health_check_method ? kind::health
                                                 : kind::unknown;
    if (k == kind::unknown)
      return session_.fail(stream, grpc_status::unimplemented,
                           "unknown method " + std::string(path));
    const auto now = steady::now();
    auto deadline = rls_service::clock::time_point::max();
    if (timeout) deadline = now + std::chrono::duration_cast<steady::duration>(*timeout);
    const call fresh{k, call_state::fresh, 0, nullptr, now, deadline, false};
    if (spare_calls_.empty()) {
      calls_.emplace(stream, fresh);
    } else {  // an ended call's map node: no allocation
      auto node = std::move(spare_calls_.back());
      spare_calls_.pop_back();
      node.key() = stream;
      node.mapped() = fresh;
      calls_.insert(std::move(node));
    }
    fresh_.push_back(stream);
  }

  // The calls of this read still without their message go into the guard (or are refused).
  void admit_fresh() {
    for (const auto stream : fresh_) {
      const auto it = calls_.find(stream);
      if (it == calls_.end() || it->second.state != call_state::fresh) continue;
      auto& c = it->second;
      auto* waiting = new waiting_call{this->weak_from_this(), stream};
      const auto t = s_.guard.admit(peer_, steady::now(), waiting);
      if (t.what != stream_guard::verdict::admitted) {
        delete waiting;
        end_call(it);
        s_.metrics.record_stream_ended(rls_metrics::stream_end::per_peer);
        session_.fail(stream, grpc_status::resource_exhausted,
                      "too many calls from this address are waiting for their message");
        continue;
      }
      c.state = call_state::waiting;
      c.guard_id = t.id;
      c.waiting = waiting;
      if (t.evicted) {
        auto* evicted = static_cast<waiting_call*>(t.evicted);
        s_.metrics.record_stream_ended(rls_metrics::stream_end::evicted);
        if (auto other = evicted->connection.lock())
          other->end_waiting(evicted->stream, grpc_status::resource_exhausted,
                             "evicted: too many calls were waiting for their message");
        delete evicted;
      }
    }
    fresh_.clear();
  }

  void on_message(std::int32_t stream, std::string_view message) override {
    const auto it = calls_.find(stream);
    if (it == calls_.end()) return;
    auto& c = it->second;
    if (c.state == call_state::waiting) {
      if (!s_.guard.arrived(c.guard_id)) {
        c.state = call_state::taken;  // the sweeper or an eviction ends it
        return;
      }
      delete c.waiting;
      c.waiting = nullptr;
    } else if (c.state != call_state::fresh) {
      return;
    }
    c.state = call_state::deciding;
    if (c.what == kind::health) {
      end_call(it);
      return answer_health(stream, message);
    }
    if (!parse_rls_request(message, request_)) {
      s_.metrics.observe_request(steady::now() - c.start, grpc_code_class::invalid_argument);
      end_call(it);
      return session_.fail(stream, grpc_status::invalid_argument, "not a RateLimitRequest");
    }
    ++s_.deciding;
    // The connection lives while it has decisions out (keep_), so the handler holds only a
    // pointer and the stream: small enough for std::function to keep without allocating.
    if (deciding_here_++ == 0) keep_ = this->shared_from_this();
    s_.service.async_should_rate_limit_trading(
        request_, c.deadline, [this, stream](rls_result r) {
          auto& shared = s_;
          // On the memory backend the answer comes on this stack: no hop.
          if (io_.get_executor().running_in_this_thread() && in_receive_) {
            decided(stream, r);
            release_decision();
          } else {
            asio::post(io_, [this, stream, r = std::move(r)]() mutable {
              decided(stream, r);
              flush_after_answers();
              release_decision();  // last: it may end the connection
            });
          }
          --shared.deciding;  // last: the server's shutdown waits for it before its threads end
        });
    // A large request's memory (one refused, not traded) is not kept for the next.
    if (request_.descriptors.capacity() > kept_descriptors) request_ = request{};
  }

  void on_closed(std::int32_t stream) override {
    const auto it = calls_.find(stream);
    if (it == calls_.end()) return;
    // Being decided: kept, for decided() to count it cancelled.
    if (it->second.state == call_state::deciding) {
      it->second.gone = true;
      return;
    }
    forget(it->second);
    end_call(it);
  }

 private:
  static constexpr bool tls = !std::is_same_v<Stream, tcp::socket>;
  enum class kind { rls, health, unknown };
  enum class call_state { fresh, waiting, taken, deciding };
  struct call {
    kind what;
    call_state state;
    std::uint64_t guard_id;
    waiting_call* waiting;  // while in the guard and ours
    steady::time_point start;
    steady::time_point deadline;
    bool gone = false;  // its stream ended while it was decided
  };

  // Removes a call; its map node is kept for a later one (spare_calls of them).
  using call_map = std::unordered_map<std::int32_t, call>;
  typename call_map::iterator end_call(typename call_map::iterator it) {
    auto next = std::next(it);
    auto node = calls_.extract(it);
    if (spare_calls_.size() < spare_calls) spare_calls_.push_back(std::move(node));
    return next;
  }

  // A call that ends here while still in the guard leaves it (unless someone took it first:
  // they delete its waiting_call).
  void forget(call& c) {
    if (c.state == call_state::waiting && s_.guard.arrived(c.guard_id)) delete c.waiting;
    c.waiting = nullptr;
  }

  void answer_health(std::int32_t stream, std::string_view message) {
    const auto name = parse_health_request(message);
    if (!name)
      return session_.fail(stream, grpc_status::invalid_argument, "not a HealthCheckRequest");
    if (!name->empty() && *name != rls_service_name && *name != upstream_service_name)
      return session_.fail(stream, grpc_status::not_found, "service name unknown");
    // As /readyz (the backend answers), and not once the drain has begun.
    session_.answer(stream, serialize_health_response(s_.serving.load() && s_.service.ready()));
  }

  // The decision came back. A call whose stream is gone was given up by its client: nothing is
  // taken back (the request may have gone through: Envoy fails open), so it charges, as
  // upstream's do, and is counted cancelled.
  void decided(std::int32_t stream, const rls_result& r) {
    const auto it = calls_.find(stream);
    if (it == calls_.end()) return;  // not expected: a deciding call stays until here
    const auto elapsed = steady::now() - it->second.start;
    const bool gone = it->second.gone;
    end_call(it);
    if (closed_ || gone)
      return s_.metrics.observe_request(elapsed, grpc_code_class::cancelled);
    s_.metrics.observe_request(elapsed, class_of(r.outcome));
    if (r.outcome != rls_result::kind::ok)
      return session_.fail(stream, status_of(r.outcome), r.message);
    message_.clear();
    serialize_rls_response(r.response, message_);
    session_.answer(stream, message_);
  }

  // An answer from the backend's thread is written at once when it is the connection's only
  // decision out (a connection of one call at a time); with others out, their answers may be
  // queued right behind it (one backend reply decides many calls), so the write waits for them
  // (one handler later) and takes them all in one write, as the asynchronous write's completion
  // used to gather them.
  void flush_after_answers() {
    if (deciding_here_ <= 1) return flush();
    if (flush_posted_) return;
    flush_posted_ = true;
    asio::post(io_, [self = this->shared_from_this()] {
      self->flush_posted_ = false;
      self->flush();
    });
  }

  // On this thread, once a decision is done with: the last one lets the connection go.
  void release_decision() {
    if (--deciding_here_ > 0) return;
    const auto last = std::move(keep_);  // may end this connection on leaving
  }

  void read() {
    stream_.async_read_some(asio::buffer(in_),
                            [self = this->shared_from_this()](const error_code& ec, std::size_t n) {
                              if (self->closed_) return;
                              if (ec) return self->shut();
                              self->on_read(n);
                            });
  }

  void on_read(std::size_t n) {
    in_receive_ = true;
    const bool ok = session_.receive(in_.data(), n);
    in_receive_ = false;
    admit_fresh();
    if (!ok) broken_ = true;
    flush();
    if (!broken_ && !closed_) read();
  }

  // Writes what the session has to send, one batch at a time; closes once it is over.
  void flush() {
    if (writing_ || closed_ || !handshaken_) return;
    std::size_t sent = 0;
    for (;;) {
      out_.clear();
      session_.send(out_, write_batch_bytes);
      // Short of the batch, yet answers left: the client's flow-control window holds them.
      if (out_.size() < write_batch_bytes && session_.unsent_answers() > 0 && !stalled_)
        watch_stall(steady::now());
      if (out_.empty()) {
        if (broken_ || !session_.alive() || (draining_ && session_.open_streams() == 0)) shut();
        return;
      }
      // A batch usually fits the socket's buffer: written at once, as the HTTP server's
      // answers are, with no asynchronous write (its operation, its completion through the
      // scheduler, and this flush again from it). Only what does not fit waits, under the
      // write deadline.
      sent = write_now();
      if (sent == out_.size()) continue;
      if (closed_) return;
      break;
    }
    writing_ = true;
    write_started_ = steady::now();
    arm(write_started_ + s_.write_timeout);
    asio::async_write(stream_, asio::buffer(out_) + sent,
                      [self = this->shared_from_this()](const error_code& ec, std::size_t) {
                        self->writing_ = false;
                        if (self->closed_) return;
                        if (ec) return self->shut();
                        self->flush();
                      });
  }

  // What of out_ the socket takes now without waiting (none over TLS, whose stream has no
  // such write); a socket error shuts the connection.
  std::size_t write_now() {
    if constexpr (tls) {
      return 0;
    } else {
      error_code ec;
      if (!stream_.non_blocking()) stream_.non_blocking(true, ec);
      if (ec) return 0;
      const auto n = stream_.write_some(asio::buffer(out_), ec);
      if (!ec) return n;
      if (ec != asio::error::would_block && ec != asio::error::try_again) shut();
      return 0;
    }
  }

  // An answer the client's window holds back is watched: when the same one is still held a
  // write_timeout later, the connection is closed, as for a socket that takes no write (a
  // client that never opens its window would hold its streams, and the connection, for good).
  // Noted again when the oldest held answer changes, so one is held at most twice that.
  void watch_stall(steady::time_point now) {
    stalled_ = session_.oldest_unsent();
    stalled_since_ = now;
    if (stalled_) arm(now + s_.write_timeout);
  }

  // One timer for the handshake's deadline, the write's and the held answer's: armed when none
  // is pending or for an earlier time (rare: a held answer's deadline before the handshake's),
  // and re-armed from what is still due when it fires (no timer operation per write).
  void arm(steady::time_point at) {
    if (armed_ && at >= armed_at_) return;
    armed_ = true;
    armed_at_ = at;
    const auto generation = ++timer_generation_;
    timer_.expires_at(at);  // a wait pending is cancelled: its handler is of an old generation
    timer_.async_wait([self = this->shared_from_this(), generation](const error_code& ec) {
      if (generation != self->timer_generation_) return;
      self->armed_ = false;
      if (ec || self->closed_) return;
      self->on_timer(steady::now());
    });
  }

  void on_timer(steady::time_point now) {
    if (!session_.established()) {
      if (!handshaken_) note_tls_failure("timed out");
      return shut();
    }
    auto next = steady::time_point::max();
    if (writing_) {
      if (now - write_started_ >= s_.write_timeout) {
        s_.metrics.record_write_timeout(rls_metrics::write_stall::socket);
        return shut();
      }
      next = write_started_ + s_.write_timeout;
    }
    if (stalled_) {
      const auto oldest = session_.oldest_unsent();
      if (oldest == stalled_ && now - stalled_since_ >= s_.write_timeout) {
        s_.metrics.record_write_timeout(rls_metrics::write_stall::flow_control);
        return shut();
      }
      if (oldest != stalled_) {
        stalled_ = oldest;
        stalled_since_ = now;
      }
      if (stalled_) next = std::min(next, stalled_since_ + s_.write_timeout);
    }
    if (next != steady::time_point::max()) arm(next);
  }

  void note_tls_failure(const std::string& error) {
    if (s_.tls_failures) s_.tls_failures->note(peer_, error);
  }

  void shut() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    timer_.cancel();
    stream_.lowest_layer().close(ignored);
    // Those being decided stay until their decision comes back (decided() counts them).
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (it->second.state == call_state::deciding) {
        ++it;
        continue;
      }
      forget(it->second);
      it = end_call(it);
    }
    std::lock_guard lock(s_.live_mutex);
    s_.live.erase(this);
  }

  asio::io_context& io_;
  Stream stream_;
  asio::steady_timer timer_;
  std::string peer_;
  grpc_shared& s_;
  h2_session session_;
  call_map calls_;
  std::vector<typename call_map::node_type> spare_calls_;  // of ended calls, for new ones
  std::size_t deciding_here_ = 0;           // decisions asked and not back
  std::shared_ptr<connection> keep_;  // this, while deciding_here_ > 0
  std::vector<std::int32_t> fresh_;  // calls of the current read not yet in the guard
  std::array<std::uint8_t, read_chunk_bytes> in_{};
  std::string out_;
  // The answer being serialized, kept for the next (at most an answer to max_descriptors).
  std::string message_;
  // The request being parsed: an earlier call's, its memory reused (rls_service trades it).
  request request_;
  steady::time_point write_started_;
  steady::time_point armed_at_;         // when the timer fires, while armed_
  std::uint64_t timer_generation_ = 0;  // of the latest wait: an earlier one was cancelled
  // The oldest answer the client's window holds back (h2_session::oldest_unsent), watched since
  // stalled_since_; none: not watching.
  std::optional<std::uint64_t> stalled_;
  steady::time_point stalled_since_;
  bool in_receive_ = false;
  bool flush_posted_ = false;  // a flush_after_answers() handler is queued
  bool handshaken_ = false;
  bool writing_ = false;
  bool armed_ = false;
  bool broken_ = false;
  bool draining_ = false;
  bool closed_ = false;
};

}  // namespace

void start_grpc_connection(asio::io_context& io, int fd, std::string peer, ssl::context* tls,
                           grpc_shared& shared) {
  asio::post(io, [&io, fd, peer = std::move(peer), tls, &shared]() mutable {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    error_code ec;
    tcp::socket socket(io);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
        (socket.assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec), ec)) {
      ::close(fd);
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    if (tls) {
      using tls_stream = ssl::stream<tcp::socket>;
      std::make_shared<connection<tls_stream>>(io, tls_stream(std::move(socket), *tls),
                                               std::move(peer), shared)
          ->start();
    } else {
      std::make_shared<connection<tcp::socket>>(io, std::move(socket), std::move(peer), shared)
          ->start();
    }
  });
}

}  // namespace floodgate::service::envoy
