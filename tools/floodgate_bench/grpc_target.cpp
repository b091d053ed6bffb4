// The gRPC target: Envoy's ShouldRateLimit to a running floodgated (--grpc-listen), one
// blocking channel per thread, as Envoy's filter would ask. Each check is one descriptor
// [{key: RULE, value: KEY}] in domain --domain with hits_addend = cost; overall OK is allowed,
// OVER_LIMIT denied, a gRPC error an error. floodgated's --envoy-config must have the rule.
#include <grpcpp/grpcpp.h>

#include <stdexcept>

#include "endpoint.hpp"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "target.hpp"

namespace floodgate::bench {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

class grpc_target final : public target {
 public:
  grpc_target(const std::string& address, std::string domain, std::string rule,
              std::chrono::milliseconds timeout)
      : stub_(pb::RateLimitService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        timeout_(timeout) {
    request_.set_domain(std::move(domain));
    auto* entry = request_.add_descriptors()->add_entries();
    entry->set_key(std::move(rule));
  }

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    auto* d = request_.mutable_descriptors(0);
    d->mutable_entries(0)->set_value(std::string(key));
    d->mutable_hits_addend()->set_value(static_cast<std::uint64_t>(cost));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    pb::RateLimitResponse response;
    const auto status = stub_->ShouldRateLimit(&ctx, request_, &response);
    if (!status.ok())
      return done({answer::verdict::error, "grpc: status " + std::to_string(status.error_code()) +
                                               ": " + status.error_message()});
    switch (response.overall_code()) {
      case pb::RateLimitResponse::OK:
        return done({answer::verdict::allowed, {}});
      case pb::RateLimitResponse::OVER_LIMIT:
        return done({answer::verdict::denied, {}});
      default:
        return done({answer::verdict::error, "grpc: overall_code UNKNOWN"});
    }
  }

 private:
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
  std::chrono::milliseconds timeout_;
  pb::RateLimitRequest request_;  // reused: only the value and hits change
};

}  // namespace

target_maker make_grpc_target(const bench_options& opts) {
  return [address = opts.url, domain = opts.domain, rule = opts.rule, timeout = opts.timeout] {
    return std::make_unique<grpc_target>(address, domain, rule, timeout);
  };
}

}  // namespace floodgate::bench
