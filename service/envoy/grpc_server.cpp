#include "grpc_server.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>

#include <stdexcept>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc_acceptor.hpp"
#include "rls_metrics.hpp"
#include "rls_service.hpp"

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

class rls_handler final : public pb::RateLimitService::CallbackService {
 public:
  rls_handler(rls_service& service, rls_metrics& metrics) : service_(service), metrics_(metrics) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* ctx,
                                            const pb::RateLimitRequest* req,
                                            pb::RateLimitResponse* resp) override {
    const auto start = std::chrono::steady_clock::now();
    auto* reactor = ctx->DefaultReactor();
    service_.async_should_rate_limit(
        from_proto(*req), steady_deadline(ctx->deadline()),
        [reactor, resp, start, &metrics = metrics_](rls_result r) {
          grpc::Status status;
          auto c = grpc_code_class::ok;
          switch (r.outcome) {
            case rls_result::kind::ok:
              to_proto(r.response, *resp);
              break;
            case rls_result::kind::invalid_argument:
              status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, r.message);
              c = grpc_code_class::invalid_argument;
              break;
            case rls_result::kind::deadline_exceeded:
              status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, r.message);
              c = grpc_code_class::deadline_exceeded;
              break;
          }
          metrics.observe_request(std::chrono::steady_clock::now() - start, c);
          reactor->Finish(status);
        });
    return reactor;
  }

 private:
  rls_service& service_;
  rls_metrics& metrics_;
};

constexpr const char* service_name = "envoy.service.ratelimit.v3.RateLimitService";

}  // namespace

struct grpc_server::impl {
  impl(const grpc_options& options, rls_service& s, rls_metrics& m)
      : handler(s, m),
        acceptor(
            options.address, options.caps,
            [this](int fd) { grpc::AddInsecureChannelFromFd(server.get(), fd); },
            [&m](connection_table::verdict v) { m.record_connection_refused(v); }) {}
  rls_handler handler;
  std::unique_ptr<grpc::Server> server;
  grpc_acceptor acceptor;  // binds first (it throws if it cannot); started once `server` is
  int port = 0;
};

grpc_server::grpc_server(const grpc_options& options, rls_service& service, rls_metrics& metrics)
    : impl_(std::make_unique<impl>(options, service, metrics)) {
  impl_->port = impl_->acceptor.port();
  // The standard grpc.health.v1.Health service, answered by gRPC itself.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;  // no listening port: the acceptor hands connections over
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  grpc::ResourceQuota quota("floodgated-grpc");
  quota.Resize(options.memory_quota_bytes);
  builder.SetResourceQuota(quota);
  builder.RegisterService(&impl_->handler);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw std::runtime_error("--grpc-listen: cannot listen on " + options.address);
  if (auto* health = impl_->server->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus(service_name, true);
  }
  impl_->acceptor.start();
}

grpc_server::~grpc_server() {
  shutdown(std::chrono::milliseconds{0});
}

int grpc_server::port() const noexcept {
  return impl_->port;
}

void grpc_server::shutdown(std::chrono::milliseconds drain) {
  if (!impl_->server) return;
  impl_->acceptor.stop();  // no new connection; those open finish their calls below
  if (auto* health = impl_->server->GetHealthCheckService()) health->SetServingStatus(false);
  impl_->server->Shutdown(std::chrono::system_clock::now() + drain);
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace floodgate::service::envoy
