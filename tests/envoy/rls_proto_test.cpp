// The RateLimitRequest decoder: what a client sends is read or refused, and a refusal writes
// nothing of its own (the call is answered INVALID_ARGUMENT; floodgated's log is logfmt/JSON
// and throttled, and a client must not be able to fill it line by line).
#include "rls_proto.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

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
