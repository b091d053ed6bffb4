#include "grpc_server.hpp"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/server_posix.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc_acceptor.hpp"
#include "rls_metrics.hpp"
#include "rls_service.hpp"
#include "stream_guard.hpp"

namespace floodgate::service::envoy {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

request from_proto(const pb::RateLimitRequest& in) {
  request out;
  out.domain = in.domain();
  out.hits_addend = in.hits_addend();
  out.descriptors.reserve(static_cast<std::size_t>(in.descriptors_size()));
  for (const auto& d : in.descriptors()) {
    descriptor od;
    od.entries.reserve(static_cast<std::size_t>(d.entries_size()));
    for (const auto& e : d.entries()) od.entries.push_back({e.key(), e.value()});
    if (d.has_limit())
      od.limit = limit_override{d.limit().requests_per_unit(), static_cast<unit>(d.limit().unit())};
    if (d.has_hits_addend()) od.hits_addend = d.hits_addend().value();
    out.descriptors.push_back(std::move(od));
  }
  return out;
}

void to_proto(const response& in, pb::RateLimitResponse& out) {
  out.set_overall_code(static_cast<pb::RateLimitResponse::Code>(in.overall));
  for (const auto& st : in.statuses) {
    auto* s = out.add_statuses();
    s->set_code(static_cast<pb::RateLimitResponse::Code>(st.status));
    s->set_limit_remaining(st.limit_remaining);
    if (st.current_limit) {
      auto* l = s->mutable_current_limit();
      l->set_name(st.current_limit->name);
      l->set_requests_per_unit(st.current_limit->requests_per_unit);
      l->set_unit(static_cast<pb::RateLimitResponse::RateLimit::Unit>(st.current_limit->per));
    }
    if (st.duration_until_reset) {
      const auto ms = st.duration_until_reset->count();
      auto* d = s->mutable_duration_until_reset();
      d->set_seconds(ms / 1000);
      d->set_nanos(static_cast<std::int32_t>(ms % 1000) * 1'000'000);
    }
  }
  for (const auto& h : in.response_headers_to_add) {
    auto* hv = out.add_response_headers_to_add();
    hv->set_key(h.key);
    hv->set_value(h.value);
  }
}

// gRPC gives the deadline on the system clock; the service counts on the steady one.
rls_service::clock::time_point steady_deadline(std::chrono::system_clock::time_point d) {
  const auto sys_now = std::chrono::system_clock::now();
  const auto now = rls_service::clock::now();
  if (d >= sys_now + std::chrono::hours(24 * 365)) return rls_service::clock::time_point::max();
  return now + std::chrono::duration_cast<rls_service::clock::duration>(d - sys_now);
}

constexpr std::string_view rls_method =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view health_check_method = "/grpc.health.v1.Health/Check";
constexpr int max_read_chunk_bytes = 16 * 1024;
constexpr const char* rls_service_name = "envoy.service.ratelimit.v3.RateLimitService";
constexpr const char* upstream_service_name = "ratelimit";  // envoyproxy/ratelimit registers it

// The client address of each connection handed to gRPC, by descriptor: gRPC names a call's
// peer "fd:N" for a connection it was handed.
class peer_book {
 public:
  void add(int fd, const std::string& peer) {
    std::lock_guard lock(mutex_);
    by_fd_[fd] = peer;
  }
  std::string of(const std::string& grpc_peer) const {
    int fd = -1;
    if (grpc_peer.starts_with("fd:")) {
      const auto* first = grpc_peer.data() + 3;
      std::from_chars(first, grpc_peer.data() + grpc_peer.size(), fd);
    }
    std::lock_guard lock(mutex_);
    const auto it = by_fd_.find(fd);
    return it != by_fd_.end() ? it->second : grpc_peer;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<int, std::string> by_fd_;  // a descriptor reused takes the new address
};

// What every call shares.
struct server_state {
  server_state(rls_service& s, rls_metrics& m, stream_caps caps)
      : service(s), metrics(m), guard(caps) {}
  rls_service& service;
  rls_metrics& metrics;
  stream_guard guard;
  peer_book peers;
  std::atomic<bool> serving{true};
};

// One call of any method, from its headers: every call is counted by the stream guard until
// its request message has arrived, so a client that never sends it holds nothing for long.
// Ended exactly once: by whoever took it out of the guard (stream_guard.hpp).
class call final : public grpc::ServerGenericBidiReactor {
 public:
  call(server_state& s, grpc::GenericCallbackServerContext* ctx) : s_(s), ctx_(ctx) {
    const auto& m = ctx->method();
    kind_ = m == rls_method ? kind::rls : m == health_check_method ? kind::health : kind::unknown;
    if (kind_ == kind::unknown) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + m));
      return;
    }
    const auto t = s.guard.admit(s.peers.of(ctx->peer()), stream_guard::clock::now(), this);
    if (t.what != stream_guard::verdict::admitted) {
      s.metrics.record_stream_ended(rls_metrics::stream_end::per_peer);
      // Reset, not only answered: the client must stop sending, and the stream's slot and
      // whatever it already sent are freed now.
      ctx->TryCancel();
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "too many calls from this address are waiting for their message"));
      return;
    }
    id_ = t.id;
    if (t.evicted)
      static_cast<call*>(t.evicted)->end_waiting(
          rls_metrics::stream_end::evicted, grpc::StatusCode::RESOURCE_EXHAUSTED,
          "evicted: too many calls were waiting for their message");
    // Takes effect once gRPC binds this reactor, after the constructor: the sweeper cannot end
    // it before (its deadline is a message_timeout away).
    StartRead(&in_);
  }

  // Whoever took this call out of the guard before its message came (the sweeper: late; a new
  // call: evicted) ends it, and touches it no more.
  void end_waiting(rls_metrics::stream_end why, grpc::StatusCode code, const char* message) {
    s_.metrics.record_stream_ended(why);
    ctx_->TryCancel();  // may end the read at once, here: OnReadDone then leaves it to us
    Finish(grpc::Status(code, message));
  }

  void OnReadDone(bool ok) override {
    if (id_ == 0 || !s_.guard.arrived(id_)) return;  // refused, or the sweeper ends it
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "no request message"));
    if (kind_ == kind::health) return answer_health();
    answer_rls();
  }

  // The client cancelled, or its deadline passed. Nothing is taken back: the request may
  // have gone through (Envoy fails open by default), so its hits count, as upstream's do.
  void OnCancel() override { cancelled_ = true; }

  void OnDone() override { delete this; }

 private:
  enum class kind { rls, health, unknown };

  void answer_health() {
    grpc::health::v1::HealthCheckRequest req;
    if (!grpc::SerializationTraits<decltype(req)>::Deserialize(&in_, &req).ok())
      return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "not a HealthCheckRequest"));
    const auto& name = req.service();
    if (!name.empty() && name != rls_service_name && name != upstream_service_name)
      return Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "service name unknown"));
    // As /readyz (the backend answers), and not once the drain has begun: a load balancer
    // moves new calls elsewhere while those in flight finish.
    grpc::health::v1::HealthCheckResponse resp;
    resp.set_status(s_.serving.load() && s_.service.ready()
                        ? grpc::health::v1::HealthCheckResponse::SERVING
                        : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    write_and_finish(resp);
  }

  void answer_rls() {
    const auto start = std::chrono::steady_clock::now();
    pb::RateLimitRequest req;
    if (!grpc::SerializationTraits<pb::RateLimitRequest>::Deserialize(&in_, &req).ok()) {
      s_.metrics.observe_request(std::chrono::steady_clock::now() - start,
                                 grpc_code_class::invalid_argument);
      return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "not a RateLimitRequest"));
    }
    s_.service.async_should_rate_limit(
        from_proto(req), steady_deadline(ctx_->deadline()), [this, start](rls_result r) {
          auto c = grpc_code_class::ok;
          grpc::Status status;
          switch (r.outcome) {
            case rls_result::kind::ok:
              break;
            case rls_result::kind::invalid_argument:
              status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, r.message);
              c = grpc_code_class::invalid_argument;
              break;
            case rls_result::kind::deadline_exceeded:
              status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, r.message);
              c = grpc_code_class::deadline_exceeded;
              break;
            case rls_result::kind::unavailable:
              status = grpc::Status(grpc::StatusCode::UNAVAILABLE, r.message);
              c = grpc_code_class::unavailable;
              break;
          }
          if (cancelled_.load()) c = grpc_code_class::cancelled;
          s_.metrics.observe_request(std::chrono::steady_clock::now() - start, c);
          if (!status.ok()) return Finish(status);
          pb::RateLimitResponse resp;
          to_proto(r.response, resp);
          write_and_finish(resp);
        });
  }

  template <class Message>
  void write_and_finish(const Message& m) {
    bool own = false;
    if (!grpc::SerializationTraits<Message>::Serialize(m, &out_, &own).ok())
      return Finish(grpc::Status(grpc::StatusCode::INTERNAL, "cannot serialize the response"));
    StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
  }

  server_state& s_;
  grpc::GenericCallbackServerContext* ctx_;
  kind kind_ = kind::unknown;
  std::uint64_t id_ = 0;  // in the guard; 0: never admitted
  std::atomic<bool> cancelled_{false};
  grpc::ByteBuffer in_, out_;
};

class dispatcher final : public grpc::CallbackGenericService {
 public:
  explicit dispatcher(server_state& s) : s_(s) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new call(s_, ctx);
  }

 private:
  server_state& s_;
};

// Ends the calls whose message is late, at their deadline (or within a quarter of the timeout
// of it, for a call admitted while the guard was empty).
class sweeper {
 public:
  explicit sweeper(stream_guard& g) : guard_(g), thread_([this] { run(); }) {}
  ~sweeper() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      const auto now = stream_guard::clock::now();
      lock.unlock();
      for (void* c : guard_.expire(now))
        static_cast<call*>(c)->end_waiting(rls_metrics::stream_end::timeout,
                                           grpc::StatusCode::DEADLINE_EXCEEDED,
                                           "the request message did not arrive in time");
      const auto next = guard_.next_deadline().value_or(now + guard_.caps().message_timeout / 4);
      lock.lock();
      wake_.wait_until(lock, next, [this] { return stop_; });
    }
  }

  stream_guard& guard_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest exists
};

}  // namespace

struct grpc_server::impl {
  impl(const grpc_options& options, rls_service& s, rls_metrics& m)
      : state(s, m, options.streams),
        generic(state),
        tls(options.tls
                ? std::make_unique<tls_relay>(
                      *options.tls, [this](int fd, const std::string& peer) { serve(fd, peer); })
                : nullptr),
        acceptor(
            options.address, options.caps,
            [this](int fd, const std::string& peer) {
              if (tls)
                tls->adopt(fd, peer);  // served once its handshake is done
              else
                serve(fd, peer);
            },
            [&m](connection_table::verdict v) { m.record_connection_refused(v); }) {}
  // gRPC serves `fd` in plaintext: the client's connection, or the relay's end of it. Not
  // once shutdown has begun (a TLS handshake may finish after the acceptor stopped).
  void serve(int fd, const std::string& peer) {
    std::lock_guard lock(handing_over);
    if (shutting_down) {
      ::close(fd);
      return;
    }
    state.peers.add(fd, peer);
    grpc::AddInsecureChannelFromFd(server.get(), fd);
  }
  std::mutex handing_over;
  bool shutting_down = false;  // under handing_over
  server_state state;
  dispatcher generic;
  std::unique_ptr<grpc::Server> server;
  std::optional<sweeper> sweep;    // from start to the last call's end
  std::unique_ptr<tls_relay> tls;  // reads the files first (throws for a bad one)
  grpc_acceptor acceptor;          // binds (it throws if it cannot); started once `server` is
  int port = 0;
};

grpc_server::grpc_server(const grpc_options& options, rls_service& service, rls_metrics& metrics)
    : impl_(std::make_unique<impl>(options, service, metrics)) {
  impl_->port = impl_->acceptor.port();
  grpc::ServerBuilder builder;  // no listening port: the acceptor hands connections over
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  // A stream's window stays at gRPC's 64 KiB (the message cap): probing for more bandwidth
  // would let one stream buffer megabytes, and no request of this API needs them.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // A stream's bytes are slices of the read buffer they came in (no copy), so a call holding
  // 16 KB pins the whole buffer, which grows to 4 MB by default: 80 connections of stalled
  // streams took 2.2 GB for 1.3 GB sent. Small reads keep what a stalled call pins near what
  // it sent; this API's requests are a few hundred bytes.
  builder.AddChannelArgument(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, max_read_chunk_bytes);
  grpc::ResourceQuota quota("floodgated-grpc");
  quota.Resize(options.memory_quota_bytes);
  builder.SetResourceQuota(quota);
  // Every method through one generic service: gRPC hands a registered unary method's call over
  // only once its whole message has arrived, and holds it unseen until then for as long as the
  // client likes; a generic call is ours from its headers (the stream guard).
  builder.RegisterCallbackGenericService(&impl_->generic);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw std::runtime_error("--grpc-listen: cannot listen on " + options.address);
  impl_->sweep.emplace(impl_->state.guard);
  impl_->acceptor.start();
}

grpc_server::~grpc_server() {
  shutdown(std::chrono::milliseconds{0});
}

void grpc_server::begin_drain() {
  impl_->state.serving = false;
}

int grpc_server::port() const noexcept {
  return impl_->port;
}

void grpc_server::shutdown(std::chrono::milliseconds drain) {
  if (!impl_->server) return;
  impl_->acceptor.stop();  // no new connection; those open finish their calls below
  {
    std::lock_guard lock(impl_->handing_over);
    impl_->shutting_down = true;
  }
  impl_->state.serving = false;
  impl_->server->Shutdown(std::chrono::system_clock::now() + drain);
  impl_->server->Wait();
  if (impl_->tls) impl_->tls->stop();  // after gRPC: its last answers went out through it
  impl_->sweep.reset();  // after the last call: none is left in the guard
  impl_->server.reset();
}

}  // namespace floodgate::service::envoy
