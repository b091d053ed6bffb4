// --log-format json's conversion of a logfmt line (service/logging/log_json.hpp).
#include "logging/log_json.hpp"

#include <gtest/gtest.h>

#include "logging/log_format.hpp"

namespace floodgate::service {
namespace {

TEST(log_json, the_same_fields_as_the_logfmt_line) {
  EXPECT_EQ(
      logfmt_to_json("T", "info", "msg=\"config loaded\" file=\"/a b.yaml\" rules=3 groups=0"),
      R"({"ts":"T","level":"info","msg":"config loaded","file":"/a b.yaml","rules":3,"groups":0})");
}

TEST(log_json, quote_escapes_are_undone_and_json_escapes_applied) {
  const auto line = "msg=" + quote("say \"hi\"\\ now\nplease") + " error=" + quote("tab\there");
  EXPECT_EQ(logfmt_to_json("T", "error", line),
            R"({"ts":"T","level":"error","msg":"say \"hi\"\\ now\nplease","error":"tab\there"})");
}

TEST(log_json, bare_values_are_numbers_or_booleans_only_when_they_are) {
  EXPECT_EQ(
      logfmt_to_json("T", "warning", "a=-1.5 b=true c=01 d=1e5 e=redis f=0 g=1."),
      R"({"ts":"T","level":"warning","a":-1.5,"b":true,"c":"01","d":"1e5","e":"redis","f":0,"g":"1."})");
}

TEST(log_json, a_token_without_a_key_is_kept_as_text) {
  EXPECT_EQ(logfmt_to_json("T", "info", "msg=\"x\" stray words"),
            R"({"ts":"T","level":"info","msg":"x","text":"stray words"})");
}

}  // namespace
}  // namespace floodgate::service
