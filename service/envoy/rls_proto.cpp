#include "rls_proto.hpp"

#include <google/protobuf/arena.h>
#include <google/protobuf/stubs/logging.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
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
  // The message's objects on an arena whose first block is on this stack: a request of a few
  // descriptors takes no allocation but its strings'.
  alignas(std::max_align_t) char block[2048];
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = sizeof block;
  google::protobuf::Arena arena(options);
  auto& in = *google::protobuf::Arena::CreateMessage<pb::RateLimitRequest>(&arena);
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

// The response in protobuf's wire format, written here: the fields in number order and those
// at their default left out, as libprotobuf writes them (rls_proto_test compares the bytes),
// without building its message objects first.
namespace {

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>(v | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// int32 and enum fields: a negative one is sign-extended to 64 bits, as protobuf writes it.
std::uint64_t as_varint(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

constexpr std::uint8_t varint_type = 0, length_type = 2;

void put_tag(std::string& out, unsigned field, std::uint8_t type) {
  out += static_cast<char>(field << 3 | type);  // fields 1-15: one byte
}

std::size_t varint_field_size(std::uint64_t v) {
  return v == 0 ? 0 : 1 + varint_size(v);
}
void put_varint_field(std::string& out, unsigned field, std::uint64_t v) {
  if (v == 0) return;
  put_tag(out, field, varint_type);
  put_varint(out, v);
}

std::size_t bytes_field_size(std::string_view s) {
  return s.empty() ? 0 : 1 + varint_size(s.size()) + s.size();
}
void put_bytes_field(std::string& out, unsigned field, std::string_view s) {
  if (s.empty()) return;
  put_tag(out, field, length_type);
  put_varint(out, s.size());
  out.append(s);
}

// A present sub-message of `size` bytes: its tag and length (its fields follow).
std::size_t message_field_size(std::size_t size) {
  return 1 + varint_size(size) + size;
}
void put_message_head(std::string& out, unsigned field, std::size_t size) {
  put_tag(out, field, length_type);
  put_varint(out, size);
}

// RateLimitResponse.RateLimit: requests_per_unit = 1, unit = 2, name = 3.
std::size_t limit_size(const reported_limit& l) {
  return varint_field_size(l.requests_per_unit) +
         varint_field_size(as_varint(static_cast<int>(l.per))) + bytes_field_size(l.name);
}

// google.protobuf.Duration: seconds = 1, nanos = 2.
struct duration_parts {
  std::int64_t seconds;
  std::int32_t nanos;
};
duration_parts parts_of(std::chrono::milliseconds d) {
  const auto ms = d.count();
  return {ms / 1000, static_cast<std::int32_t>(ms % 1000) * 1'000'000};
}
std::size_t duration_size(duration_parts d) {
  return varint_field_size(as_varint(d.seconds)) + varint_field_size(as_varint(d.nanos));
}

// DescriptorStatus: code = 1, current_limit = 2, limit_remaining = 3, duration_until_reset = 4.
std::size_t status_size(const descriptor_status& st) {
  std::size_t n = varint_field_size(as_varint(static_cast<int>(st.status))) +
                  varint_field_size(st.limit_remaining);
  if (st.current_limit) n += message_field_size(limit_size(*st.current_limit));
  if (st.duration_until_reset)
    n += message_field_size(duration_size(parts_of(*st.duration_until_reset)));
  return n;
}

void put_status(std::string& out, const descriptor_status& st) {
  put_varint_field(out, 1, as_varint(static_cast<int>(st.status)));
  if (const auto& l = st.current_limit) {
    put_message_head(out, 2, limit_size(*l));
    put_varint_field(out, 1, l->requests_per_unit);
    put_varint_field(out, 2, as_varint(static_cast<int>(l->per)));
    put_bytes_field(out, 3, l->name);
  }
  put_varint_field(out, 3, st.limit_remaining);
  if (st.duration_until_reset) {
    const auto d = parts_of(*st.duration_until_reset);
    put_message_head(out, 4, duration_size(d));
    put_varint_field(out, 1, as_varint(d.seconds));
    put_varint_field(out, 2, as_varint(d.nanos));
  }
}

// envoy.config.core.v3.HeaderValue: key = 1, value = 2.
std::size_t header_size(const header& h) {
  return bytes_field_size(h.key) + bytes_field_size(h.value);
}

}  // namespace

// RateLimitResponse: overall_code = 1, statuses = 2, response_headers_to_add = 3.
std::string serialize_rls_response(const response& in) {
  std::size_t size = varint_field_size(as_varint(static_cast<int>(in.overall)));
  for (const auto& st : in.statuses) size += message_field_size(status_size(st));
  for (const auto& h : in.response_headers_to_add) size += message_field_size(header_size(h));
  std::string out;
  out.reserve(size);
  put_varint_field(out, 1, as_varint(static_cast<int>(in.overall)));
  for (const auto& st : in.statuses) {
    put_message_head(out, 2, status_size(st));
    put_status(out, st);
  }
  for (const auto& h : in.response_headers_to_add) {
    put_message_head(out, 3, header_size(h));
    put_bytes_field(out, 1, h.key);
    put_bytes_field(out, 2, h.value);
  }
  return out;
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
