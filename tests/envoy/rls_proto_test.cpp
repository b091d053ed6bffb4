// The RateLimitRequest decoder: what a client sends is read or refused, and a refusal writes
// nothing of its own (the call is answered INVALID_ARGUMENT; floodgated's log is logfmt/JSON
// and throttled, and a client must not be able to fill it line by line).
#include "rls_proto.hpp"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace floodgate::service::envoy
