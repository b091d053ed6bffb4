// The gRPC target: Envoy's ShouldRateLimit to a running floodgated (--grpc-listen), one
// HTTP/2 connection per thread, as an Envoy worker's filter would ask. Each check is one
// descriptor [{key: RULE, value: KEY}] in domain --domain with hits_addend = cost; overall OK
// is allowed, OVER_LIMIT denied, a gRPC error an error. floodgated's --envoy-config must have
// the rule. With --h2-streams 1 (the default) one call is in flight on the connection
// (grpc_h2_client, blocking); with N > 1, N calls are multiplexed on it (grpc_h2_mux), as
// Envoy sends them.
#include <mutex>
#include <stdexcept>

#include "endpoint.hpp"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc_h2_client.hpp"
#include "grpc_h2_mux.hpp"
#include "target.hpp"

namespace floodgate::bench {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

constexpr std::string_view method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

// One check's request, serialized.
class request_writer {
 public:
  request_writer(std::string domain, std::string rule) {
    request_.set_domain(std::move(domain));
    request_.add_descriptors()->add_entries()->set_key(std::move(rule));
  }
  // Reused: only the value and hits change.
  const std::string& write(std::string_view key, std::int64_t cost) {
    auto* d = request_.mutable_descriptors(0);
    d->mutable_entries(0)->set_value(std::string(key));
    d->mutable_hits_addend()->set_value(static_cast<std::uint64_t>(cost));
    request_.SerializeToString(&bytes_);
    return bytes_;
  }

 private:
  pb::RateLimitRequest request_;
  std::string bytes_;
};

answer answer_of(const grpc_reply& reply, pb::RateLimitResponse& response) {
  if (!reply.transport_error.empty()) return {answer::verdict::error, reply.transport_error};
  if (reply.grpc_status != 0)
    return {answer::verdict::error, "grpc: status " + std::to_string(reply.grpc_status) + ": " +
                                        reply.grpc_message};
  if (!response.ParseFromString(reply.message))
    return {answer::verdict::error, "grpc: the answer is not a RateLimitResponse"};
  switch (response.overall_code()) {
    case pb::RateLimitResponse::OK:
      return {answer::verdict::allowed, {}};
    case pb::RateLimitResponse::OVER_LIMIT:
      return {answer::verdict::denied, {}};
    default:
      return {answer::verdict::error, "grpc: overall_code UNKNOWN"};
  }
}

class grpc_target final : public target {
 public:
  grpc_target(endpoint e, std::string domain, std::string rule, std::chrono::milliseconds timeout)
      : client_(std::move(e), timeout), writer_(std::move(domain), std::move(rule)) {}

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    done(answer_of(client_.call(method, writer_.write(key, cost)), response_));
  }

 private:
  grpc_h2_client client_;
  request_writer writer_;
  pb::RateLimitResponse response_;
};

// N calls in flight on one connection: the worker's slots call from its thread and from the
// completions, on the connection's I/O thread.
class grpc_multiplexed_target final : public target {
 public:
  grpc_multiplexed_target(endpoint e, std::string domain, std::string rule,
                          std::chrono::milliseconds timeout)
      : writer_(std::move(domain), std::move(rule)), mux_(std::move(e), timeout) {}

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    std::unique_lock lock(writer_mutex_);
    const auto& bytes = writer_.write(key, cost);
    mux_.call(method, bytes, [done = std::move(done)](grpc_reply reply) {
      thread_local pb::RateLimitResponse response;
      done(answer_of(reply, response));
    });
  }

 private:
  std::mutex writer_mutex_;
  request_writer writer_;
  grpc_h2_mux mux_;  // last: it goes first, after its calls have completed
};

}  // namespace

target_maker make_grpc_target(const bench_options& opts) {
  auto e = parse_endpoint("http://" + opts.url, "http");
  if (!e) throw std::runtime_error("--grpc: cannot read host:port in '" + opts.url + "'");
  return [e = *e, domain = opts.domain, rule = opts.rule, timeout = opts.timeout,
          streams = opts.h2_streams]() -> std::unique_ptr<target> {
    if (streams > 1) return std::make_unique<grpc_multiplexed_target>(e, domain, rule, timeout);
    return std::make_unique<grpc_target>(e, domain, rule, timeout);
  };
}

}  // namespace floodgate::bench
