// The gRPC target: Envoy's ShouldRateLimit to a running floodgated (--grpc-listen), one
// HTTP/2 connection per thread with one call in flight (grpc_h2_client), as an Envoy worker's
// filter would ask. Each check is one descriptor [{key: RULE, value: KEY}] in domain --domain
// with hits_addend = cost; overall OK is allowed, OVER_LIMIT denied, a gRPC error an error.
// floodgated's --envoy-config must have the rule.
#include <stdexcept>

#include "endpoint.hpp"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc_h2_client.hpp"
#include "target.hpp"

namespace floodgate::bench {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

constexpr std::string_view method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

class grpc_target final : public target {
 public:
  grpc_target(endpoint e, std::string domain, std::string rule, std::chrono::milliseconds timeout)
      : client_(std::move(e), timeout) {
    request_.set_domain(std::move(domain));
    auto* entry = request_.add_descriptors()->add_entries();
    entry->set_key(std::move(rule));
  }

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    auto* d = request_.mutable_descriptors(0);
    d->mutable_entries(0)->set_value(std::string(key));
    d->mutable_hits_addend()->set_value(static_cast<std::uint64_t>(cost));
    request_.SerializeToString(&bytes_);
    const auto reply = client_.call(method, bytes_);
    if (!reply.transport_error.empty())
      return done({answer::verdict::error, reply.transport_error});
    if (reply.grpc_status != 0)
      return done({answer::verdict::error, "grpc: status " + std::to_string(reply.grpc_status) +
                                               ": " + reply.grpc_message});
    if (!response_.ParseFromString(reply.message))
      return done({answer::verdict::error, "grpc: the answer is not a RateLimitResponse"});
    switch (response_.overall_code()) {
      case pb::RateLimitResponse::OK:
        return done({answer::verdict::allowed, {}});
      case pb::RateLimitResponse::OVER_LIMIT:
        return done({answer::verdict::denied, {}});
      default:
        return done({answer::verdict::error, "grpc: overall_code UNKNOWN"});
    }
  }

 private:
  grpc_h2_client client_;
  pb::RateLimitRequest request_;  // reused: only the value and hits change
  pb::RateLimitResponse response_;
  std::string bytes_;
};

}  // namespace

target_maker make_grpc_target(const bench_options& opts) {
  auto e = parse_endpoint("http://" + opts.url, "http");
  if (!e) throw std::runtime_error("--grpc: cannot read host:port in '" + opts.url + "'");
  return [e = *e, domain = opts.domain, rule = opts.rule, timeout = opts.timeout] {
    return std::make_unique<grpc_target>(e, domain, rule, timeout);
  };
}

}  // namespace floodgate::bench
