#include "rls_proto.hpp"

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

// The request in protobuf's wire format, read here as libprotobuf's parser reads it (the same
// accepted and refused bytes: rls_proto_test compares the two on many messages, well formed
// and mangled), without building its message objects: a third of its instructions.
namespace {

// libprotobuf's default recursion limit: nested messages and groups, unknown ones included.
constexpr int max_depth = 100;

class wire_reader {
 public:
  explicit wire_reader(std::string_view bytes) : p_(bytes.data()), end_(p_ + bytes.size()) {}

  // Up to 10 bytes (a longer one is refused), the value modulo 2^64, as libprotobuf.
  bool varint(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) return false;
      const auto b = static_cast<std::uint8_t>(*p_++);
      if (shift < 64) v |= std::uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) return true;
    }
    return false;
  }
  // A tag: up to 5 bytes, modulo 2^32.
  bool tag(std::uint32_t& t) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (p_ == end_) return false;
      const auto b = static_cast<std::uint8_t>(*p_++);
      v |= std::uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) {
        t = static_cast<std::uint32_t>(v);
        return true;
      }
    }
    return false;
  }
  // A length: up to 5 bytes, below 2^31, and within the bytes left.
  bool length(std::string_view& out) {
    std::uint64_t n = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ == end_ || shift > 28) return false;
      const auto b = static_cast<std::uint8_t>(*p_++);
      if (shift == 28 && b >= 8) return false;
      n |= std::uint64_t{b & 0x7fu} << shift;
      if (b < 0x80) break;
    }
    if (n > static_cast<std::uint64_t>(end_ - p_)) return false;
    out = {p_, static_cast<std::size_t>(n)};
    p_ += n;
    return true;
  }
  bool skip(std::size_t n) {
    if (n > static_cast<std::size_t>(end_ - p_)) return false;
    p_ += n;
    return true;
  }
  bool done() const noexcept { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

constexpr std::uint32_t varint_wire = 0, fixed64_wire = 1, length_wire = 2, start_group_wire = 3,
                        end_group_wire = 4, fixed32_wire = 5;

bool skip_group(wire_reader& r, std::uint32_t number, int depth);

// A field this reader does not keep (unknown, or a known one with another wire type).
bool skip_field(wire_reader& r, std::uint32_t tag, int depth) {
  std::uint64_t ignored = 0;
  std::string_view bytes;
  switch (tag & 7) {
    case varint_wire:
      return r.varint(ignored);
    case fixed64_wire:
      return r.skip(8);
    case length_wire:
      return r.length(bytes);
    case start_group_wire:
      return skip_group(r, tag >> 3, depth);
    case fixed32_wire:
      return r.skip(4);
    default:
      return false;
  }
}

bool skip_group(wire_reader& r, std::uint32_t number, int depth) {
  if (depth + 1 > max_depth) return false;
  for (std::uint32_t t = 0;;) {
    if (!r.tag(t) || t >> 3 == 0) return false;  // field 0: never a field
    if ((t & 7) == end_group_wire) return t >> 3 == number;
    if (!skip_field(r, t, depth + 1)) return false;
  }
}

// Each field of the message in `bytes` to `field(tag, reader)`, the rest skipped: false if the
// bytes are not one message (a tag 0, an end-group, a bad length) or `field` says so.
template <class F>
bool read_message(std::string_view bytes, int depth, F&& field) {
  if (depth > max_depth) return false;
  wire_reader r(bytes);
  while (!r.done()) {
    std::uint32_t t = 0;
    if (!r.tag(t) || t >> 3 == 0 || (t & 7) == end_group_wire) return false;
    const auto handled = field(t, r);
    if (handled < 0) return false;
    if (handled == 0 && !skip_field(r, t, depth)) return false;
  }
  return true;
}

// UTF-8 as libprotobuf validates a proto3 string: no overlong forms, no surrogates, at most
// U+10FFFF.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n = 0;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i <= n; ++i)
      if (p[i] < 0x80 || p[i] > 0xbf) return false;
    p += n + 1;
  }
  return true;
}

// A string field: 1 handled, -1 refused (libprotobuf refuses a request with invalid UTF-8).
int read_string(wire_reader& r, std::string& out) {
  std::string_view bytes;
  if (!r.length(bytes) || !valid_utf8(bytes)) return -1;
  out.assign(bytes);
  return 1;
}

// The tag of field `number` with wire type `wire`.
constexpr std::uint32_t tag_of(std::uint32_t number, std::uint32_t wire) {
  return number << 3 | wire;
}

// RateLimitDescriptor.Entry: key = 1, value = 2.
bool read_entry(std::string_view bytes, int depth, descriptor_entry& e) {
  return read_message(bytes, depth, [&](std::uint32_t t, wire_reader& r) {
    if (t == tag_of(1, length_wire)) return read_string(r, e.key);
    if (t == tag_of(2, length_wire)) return read_string(r, e.value);
    return 0;
  });
}

// A varint field kept as `T` (uint32 and enum fields keep the low 32 bits, as libprotobuf).
template <class T>
int read_varint(wire_reader& r, T& out) {
  std::uint64_t v = 0;
  if (!r.varint(v)) return -1;
  out = static_cast<T>(v);
  return 1;
}

// RateLimitDescriptor: entries = 1, limit = 2 (RateLimitOverride: requests_per_unit = 1,
// unit = 2), hits_addend = 3 (UInt64Value: value = 1). A sub-message given twice is merged, as
// libprotobuf merges it: read into the same one.
bool read_descriptor(std::string_view bytes, int depth, descriptor& d) {
  return read_message(bytes, depth, [&](std::uint32_t t, wire_reader& r) -> int {
    std::string_view sub;
    if (t == tag_of(1, length_wire)) {
      if (!r.length(sub)) return -1;
      return read_entry(sub, depth + 1, d.entries.emplace_back()) ? 1 : -1;
    }
    if (t == tag_of(2, length_wire)) {
      if (!r.length(sub)) return -1;
      if (!d.limit) d.limit.emplace();
      auto& l = *d.limit;
      return read_message(sub, depth + 1, [&](std::uint32_t lt, wire_reader& lr) {
               if (lt == tag_of(1, varint_wire)) return read_varint(lr, l.requests_per_unit);
               if (lt == tag_of(2, varint_wire)) {
                 std::int32_t u = 0;
                 const int ok = read_varint(lr, u);
                 l.per = static_cast<unit>(u);
                 return ok;
               }
               return 0;
             })
                 ? 1
                 : -1;
    }
    if (t == tag_of(3, length_wire)) {
      if (!r.length(sub)) return -1;
      if (!d.hits_addend) d.hits_addend.emplace(0);
      auto& h = *d.hits_addend;
      return read_message(sub, depth + 1,
                          [&](std::uint32_t ht, wire_reader& hr) {
                            return ht == tag_of(1, varint_wire) ? read_varint(hr, h) : 0;
                          })
                 ? 1
                 : -1;
    }
    return 0;
  });
}

}  // namespace

// RateLimitRequest: domain = 1, descriptors = 2, hits_addend = 3.
bool parse_rls_request(std::string_view bytes, request& out) {
  // Into what `out` held: its descriptors (and their entries' vectors) are cleared and filled
  // again, their memory kept; those left over at the end are dropped.
  out.domain.clear();
  out.hits_addend = 0;
  std::size_t used = 0;
  const bool ok = read_message(bytes, 0, [&](std::uint32_t t, wire_reader& r) -> int {
    if (t == tag_of(1, length_wire)) return read_string(r, out.domain);
    if (t == tag_of(2, length_wire)) {
      std::string_view sub;
      if (!r.length(sub)) return -1;
      if (used == out.descriptors.size()) out.descriptors.emplace_back();
      auto& d = out.descriptors[used++];
      d.entries.clear();
      d.limit.reset();
      d.hits_addend.reset();
      return read_descriptor(sub, 1, d) ? 1 : -1;
    }
    if (t == tag_of(3, varint_wire)) return read_varint(r, out.hits_addend);
    return 0;
  });
  out.descriptors.resize(used);
  return ok;
}

std::optional<request> parse_rls_request(std::string_view bytes) {
  request out;
  if (!parse_rls_request(bytes, out)) return std::nullopt;
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
  std::string out;
  serialize_rls_response(in, out);
  return out;
}

void serialize_rls_response(const response& in, std::string& out) {
  std::size_t size = varint_field_size(as_varint(static_cast<int>(in.overall)));
  for (const auto& st : in.statuses) size += message_field_size(status_size(st));
  for (const auto& h : in.response_headers_to_add) size += message_field_size(header_size(h));
  out.reserve(out.size() + size);
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
