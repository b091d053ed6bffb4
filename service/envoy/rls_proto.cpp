#include "rls_proto.hpp"

#include <google/protobuf/stubs/logging.h>

#include <cstdio>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc/health/v1/health.pb.h"

namespace floodgate::service::envoy {
namespace {
namespace pb = ::envoy::service::ratelimit::v3;
namespace health = ::grpc::health::v1;

int size_of(std::string_view bytes) {
  return static_cast<int>(bytes.size());
}

// libprotobuf writes a raw stderr line for every message it refuses (invalid UTF-8 in a
// string field, for one): one line per bad call, outside floodgated's log format and its
// throttle. The call is answered INVALID_ARGUMENT, which says it; only a fatal message (a bug
// of ours, never the client's input) is still written.
void keep_fatal_only(google::protobuf::LogLevel level, const char* file, int line,
                     const std::string& message) {
  if (level == google::protobuf::LOGLEVEL_FATAL)
    std::fprintf(stderr, "[libprotobuf FATAL %s:%d] %s\n", file, line, message.c_str());
}

void quiet_protobuf() {
  static const bool once = (google::protobuf::SetLogHandler(&keep_fatal_only), true);
  (void)once;
}
}  // namespace

std::optional<request> parse_rls_request(std::string_view bytes) {
  quiet_protobuf();
  pb::RateLimitRequest in;
  if (!in.ParseFromArray(bytes.data(), size_of(bytes))) return std::nullopt;
  request out;
  out.domain = std::move(*in.mutable_domain());
  out.hits_addend = in.hits_addend();
  out.descriptors.reserve(static_cast<std::size_t>(in.descriptors_size()));
  for (auto& d : *in.mutable_descriptors()) {
    descriptor od;
    od.entries.reserve(static_cast<std::size_t>(d.entries_size()));
    for (auto& e : *d.mutable_entries())
      od.entries.push_back({std::move(*e.mutable_key()), std::move(*e.mutable_value())});
    if (d.has_limit())
      od.limit = limit_override{d.limit().requests_per_unit(), static_cast<unit>(d.limit().unit())};
    if (d.has_hits_addend()) od.hits_addend = d.hits_addend().value();
    out.descriptors.push_back(std::move(od));
  }
  return out;
}

std::string serialize_rls_response(const response& in) {
  pb::RateLimitResponse out;
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
  return out.SerializeAsString();
}

std::optional<std::string> parse_health_request(std::string_view bytes) {
  quiet_protobuf();
  health::HealthCheckRequest in;
  if (!in.ParseFromArray(bytes.data(), size_of(bytes))) return std::nullopt;
  return std::move(*in.mutable_service());
}

std::string serialize_health_response(bool serving) {
  health::HealthCheckResponse out;
  out.set_status(serving ? health::HealthCheckResponse::SERVING
                         : health::HealthCheckResponse::NOT_SERVING);
  return out.SerializeAsString();
}

}  // namespace floodgate::service::envoy
