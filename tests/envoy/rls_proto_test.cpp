// The RateLimitRequest decoder: what a client sends is read or refused, and a refusal writes
// nothing of its own (the call is answered INVALID_ARGUMENT; floodgated's log is logfmt/JSON
// and throttled, and a client must not be able to fill it line by line).
#include "rls_proto.hpp"

#include <gtest/gtest.h>

#include <google/protobuf/stubs/logging.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace floodgate::service::envoy {
namespace {

// RateLimitRequest{domain: "edge", descriptors: [{entries: [{key: "remote_address", value}]}]}
std::string request_with_value(const std::string& value) {
  const std::string entry = std::string("\x0a\x0e") + "remote_address" + "\x12" +
                            static_cast<char>(value.size()) + value;
  const std::string descriptor = std::string("\x0a") + static_cast<char>(entry.size()) + entry;
  return std::string("\x0a\x04") + "edge" + "\x12" + static_cast<char>(descriptor.size()) +
         descriptor;
}

TEST(rls_proto, a_request_is_read) {
  const auto r = parse_rls_request(request_with_value("10.0.0.1"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->domain, "edge");
  ASSERT_EQ(r->descriptors.size(), 1u);
  ASSERT_EQ(r->descriptors[0].entries.size(), 1u);
  EXPECT_EQ(r->descriptors[0].entries[0].value, "10.0.0.1");
}

TEST(rls_proto, invalid_utf8_is_refused_without_a_line_on_stderr) {
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(parse_rls_request(request_with_value("\xff\xfe")));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// What libprotobuf reads from `bytes`, as the request floodgated makes of it.
std::optional<request> by_libprotobuf(std::string_view bytes) {
  namespace pb = ::envoy::service::ratelimit::v3;
  pb::RateLimitRequest in;
  if (!in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
  request out;
  out.domain = in.domain();
  out.hits_addend = in.hits_addend();
  for (const auto& d : in.descriptors()) {
    descriptor od;
    for (const auto& e : d.entries()) od.entries.push_back({e.key(), e.value()});
    if (d.has_limit())
      od.limit = limit_override{d.limit().requests_per_unit(), static_cast<unit>(d.limit().unit())};
    if (d.has_hits_addend()) od.hits_addend = d.hits_addend().value();
    out.descriptors.push_back(std::move(od));
  }
  return out;
}

std::string describe(const std::optional<request>& r) {
  if (!r) return "refused";
  std::string out = "domain=" + r->domain + " hits=" + std::to_string(r->hits_addend);
  for (const auto& d : r->descriptors) {
    out += " [";
    for (const auto& e : d.entries) out += e.key + "=" + e.value + ",";
    if (d.limit)
      out += " limit=" + std::to_string(d.limit->requests_per_unit) + "/" +
             std::to_string(static_cast<int>(d.limit->per));
    if (d.hits_addend) out += " hits=" + std::to_string(*d.hits_addend);
    out += "]";
  }
  return out;
}

// A random request as Envoy's could be (and some it could not), serialized by libprotobuf.
std::string random_request(std::mt19937& rng) {
  namespace pb = ::envoy::service::ratelimit::v3;
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<std::string> texts = {"", "edge", "remote_address", "10.0.0.1", "/api/v1",
                                          "\xc3\xa9t\xc3\xa9", "\xf0\x9f\x98\x80",
                                          std::string(200, 'k'), "a=b,c%"};
  pb::RateLimitRequest m;
  m.set_domain(texts[pick(texts.size())]);
  if (pick(3) == 0) m.set_hits_addend(rng());
  for (int i = pick(5); i > 0; --i) {
    auto* d = m.add_descriptors();
    for (int j = pick(4); j > 0; --j) {
      auto* e = d->add_entries();
      e->set_key(texts[pick(texts.size())]);
      e->set_value(texts[pick(texts.size())]);
    }
    if (pick(3) == 0) {
      d->mutable_limit()->set_requests_per_unit(pick(2) ? rng() : 0);
      d->mutable_limit()->set_unit(static_cast<::envoy::type::v3::RateLimitUnit>(pick(9)));
    }
    if (pick(3) == 0) d->mutable_hits_addend()->set_value(pick(2) ? (std::uint64_t{rng()} << 32) | rng() : 0);
  }
  return m.SerializeAsString();
}

// The request is read by hand: exactly what libprotobuf accepts, read as it reads it, on
// well-formed requests and on thousands of mangled ones (bytes changed, cut, inserted, fields
// of every wire type added, sub-messages repeated), and on the hard cases named.
TEST(rls_proto, a_request_is_read_as_libprotobuf_reads_it) {
  google::protobuf::SetLogHandler(nullptr);  // its lines for invalid UTF-8: not this test's
  using namespace std::string_literals;
  std::vector<std::string> inputs = {
      "\x00"s,                     // tag 0
      "\x0c"s,                                     // an end-group at the top
      "\x0b\x0c"s,                                 // a group of field 1, ended
      "\x0b\x14"s,                                 // a group ended by another field's end
      "\x0a\x02\xc0\x80"s,                         // an overlong NUL
      "\x0a\x03\xed\xa0\x80"s,                     // a surrogate
      "\x0a\x04\xf4\x90\x80\x80"s,                 // beyond U+10FFFF
      "\x0a\x04\xf4\x8f\xbf\xbf"s,                 // U+10FFFF
      "\x0a\x02\xe2\x82"s,                         // cut short
      "\x08\x01"s,                                 // domain as a varint: skipped
      "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"s,  // hits_addend, 10 bytes: low 32 bits
      "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"s,  // 11 bytes
      "\x12\x04\x12\x02\x08\x05\x12\x04\x12\x02\x10\x02"s,  // two descriptors with a limit each
      "\x12\x08\x12\x02\x08\x05\x12\x02\x10\x02"s,  // one limit given twice: merged
      "\x12\x02\x1a\x00"s,                         // an empty hits_addend: present, 0
      "\xfa\xff\xff\xff\x0f\x00"s,                 // a 5-byte tag
      "\xfa\xff\xff\xff\x1f\x00"s,                 // a 5-byte tag past 32 bits
      "\xfa\xff\xff\xff\xff\x0f\x00"s,             // a 6-byte tag
      "\x0a\xff\xff\xff\xff\x07"s,                 // a length past 2 GiB
      "\x0a\x80\x80\x80\x80\x00"s,                 // a 5-byte length of 0
      "\x0e\x00"s,                                 // wire type 6
      "\x0d\x00\x00\x00\x00\x11\x00\x00\x00\x00\x00\x00\x00\x00"s,  // fixed32, fixed64 fields
  };
  for (const int depth : {99, 100, 101}) {  // unknown groups nested: libprotobuf stops at 100
    std::string nested;
    for (int i = 0; i < depth; ++i) nested += "\x23";  // start group 4
    for (int i = 0; i < depth; ++i) nested += "\x24";  // end group 4
    inputs.push_back(nested);
  }
  std::mt19937 rng(24);
  for (int i = 0; i < 3000; ++i) {
    const auto base = random_request(rng);
    inputs.push_back(base);
    for (int k = 0; k < 8; ++k) {
      auto m = base;
      const auto at = [&] { return m.empty() ? 0 : rng() % (m.size() + 1); };
      switch (rng() % 6) {
        case 0:
          if (!m.empty()) m[rng() % m.size()] = static_cast<char>(rng());
          break;
        case 1:
          m.resize(at());
          break;
        case 2:
          m.insert(at(), 1, static_cast<char>(rng()));
          break;
        case 3: {  // a field of any number and wire type, its bytes random
          std::string f(1, static_cast<char>(rng() % 256));
          for (int n = static_cast<int>(rng() % 10); n > 0; --n) f += static_cast<char>(rng());
          m.insert(at(), f);
          break;
        }
        case 4:  // the whole message twice: every sub-message merged or repeated
          m += base;
          break;
        default: {  // a slice repeated
          const auto from = at();
          m.insert(at(), m.substr(from, rng() % 8));
          break;
        }
      }
      inputs.push_back(m);
    }
  }
  int accepted = 0;
  // Each input also parsed into what the one before left (grpc_connection reuses a request's
  // memory so): nothing of an earlier request may show in a later one.
  request reused;
  for (const auto& in : inputs) {
    const auto want = by_libprotobuf(in);
    accepted += want ? 1 : 0;
    ASSERT_EQ(describe(parse_rls_request(in)), describe(want))
        << "bytes (" << in.size() << "): " << testing::PrintToString(in);
    const bool read = parse_rls_request(in, reused);
    ASSERT_EQ(describe(read ? std::optional<request>(reused) : std::nullopt), describe(want))
        << "into a used request, bytes (" << in.size() << "): " << testing::PrintToString(in);
  }
  EXPECT_GT(accepted, 3000) << "too few well-formed inputs to say much";
  EXPECT_LT(accepted, static_cast<int>(inputs.size()) - 3000) << "too few refused ones";
}

// What libprotobuf writes for `in`, built through its message classes (how floodgated wrote
// responses before it wrote the bytes itself).
std::string by_libprotobuf(const response& in) {
  namespace pb = ::envoy::service::ratelimit::v3;
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

// The response's bytes are written by hand: they must be libprotobuf's, field for field, for
// every shape (defaults left out, empty sub-messages kept, lengths and values past one byte).
TEST(rls_proto, a_response_is_written_as_libprotobuf_writes_it) {
  using namespace std::chrono_literals;
  std::vector<response> cases;
  cases.push_back({});  // all defaults: no bytes
  response r;
  r.overall = code::over_limit;
  descriptor_status limited;
  limited.status = code::over_limit;
  limited.current_limit = reported_limit{"per_ip", 30, unit::minute};
  limited.duration_until_reset = 59'999ms;
  r.statuses.push_back(limited);
  descriptor_status unlimited;  // code OK, remaining at its most, no limit, no duration
  unlimited.limit_remaining = std::numeric_limits<std::uint32_t>::max();
  r.statuses.push_back(unlimited);
  descriptor_status empty_parts;  // present but empty sub-messages: written with length 0
  empty_parts.current_limit = reported_limit{};
  empty_parts.duration_until_reset = 0ms;
  r.statuses.push_back(empty_parts);
  descriptor_status long_name;  // a name of 300 bytes: a two-byte length, in a longer message
  long_name.current_limit = reported_limit{std::string(300, 'n'), 4'000'000'000u, unit::year};
  long_name.limit_remaining = 127;
  long_name.duration_until_reset = 1000ms * 86'400 * 400;
  r.statuses.push_back(long_name);
  descriptor_status negative;  // not produced, but written as protobuf would: sign-extended
  negative.duration_until_reset = -1500ms;
  r.statuses.push_back(negative);
  r.response_headers_to_add = {{"RateLimit-Limit", "30"}, {"RateLimit-Remaining", ""}, {"", "x"}};
  cases.push_back(r);
  for (std::size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(serialize_rls_response(cases[i]), by_libprotobuf(cases[i])) << "case " << i;
}

}  // namespace
}  // namespace floodgate::service::envoy
