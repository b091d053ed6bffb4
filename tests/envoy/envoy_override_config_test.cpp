// The Envoy config's `overrides:` (ours, per rate_limit): values with their own limit, checked
// as strictly as the rest of the file (file:line, duplicates, bounds, contradictions).
#include <gtest/gtest.h>

#include "config/override_table.hpp"
#include "envoy_config.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;

std::string error_for(const std::string& text) {
  std::map<std::string, domain_config, std::less<>> domains;
  try {
    parse_envoy_domain(text, "edge.yaml", domains);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

TEST(envoy_config_file, nesting_past_the_parsers_depth_is_named_as_such) {
  const auto deep = error_for("domain: edge\ndescriptors: " + std::string(600, '[') +
                              std::string(600, ']') + "\n");
  EXPECT_EQ(deep.substr(0, 63), "edge.yaml:2: invalid YAML: nested deeper than the parser allows")
      << deep;
}

const std::string head =
    "domain: edge\ndescriptors:\n  - key: ip\n    rate_limit:\n      unit: minute\n"
    "      requests_per_unit: 10\n";

TEST(envoy_overrides, values_and_prefixes_get_their_own_policy_under_the_rules_name) {
  std::map<std::string, domain_config, std::less<>> domains;
  parse_envoy_domain(head +
                         "      overrides:\n        - {value: a, requests_per_unit: 50}\n"
                         "        - {prefix: b, unit: hour}\n",
                     "edge.yaml", domains);
  const auto& r = *domains.at("edge").descriptors.at(0).limit;
  ASSERT_NE(r.overrides, nullptr);
  const auto* a = r.overrides->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->as_rule.policy, policy(r.policy->name(), algorithm::fixed_window, 50, 1min));
  EXPECT_EQ(a->tag, static_cast<std::uint32_t>(unit::minute));
  const auto* b = r.overrides->find("b7");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->as_rule.policy, policy(r.policy->name(), algorithm::fixed_window, 10, 1h));
  EXPECT_EQ(b->tag, static_cast<std::uint32_t>(unit::hour));
  EXPECT_EQ(r.overrides->find("c"), nullptr);
}

TEST(envoy_overrides, bad_overrides_name_the_file_line_and_problem) {
  const std::string o = "      overrides:\n";
  EXPECT_EQ(error_for(head + o +
                      "        - {value: a, requests_per_unit: 5}\n"
                      "        - {value: a, requests_per_unit: 6}\n"),
            "edge.yaml:9: descriptor 'ip': rate_limit: override of value 'a': duplicate value "
            "(first at line 8)");
  EXPECT_EQ(error_for(head + o + "        - {value: a, limt: 5}\n"),
            "edge.yaml:8: descriptor 'ip': rate_limit: override: unknown field 'limt' (expected "
            "value, prefix, requests_per_unit, unit, unit_multiplier)");
  EXPECT_EQ(error_for(head + o + "        - {value: a, prefix: b, requests_per_unit: 5}\n"),
            "edge.yaml:8: descriptor 'ip': rate_limit: an override takes value (one value) or "
            "prefix (every value starting with it), one of them");
  EXPECT_EQ(error_for(head + o + "        - {value: a}\n"),
            "edge.yaml:8: descriptor 'ip': rate_limit: override of value 'a': sets nothing (give "
            "requests_per_unit, unit or unit_multiplier)");
  EXPECT_EQ(error_for(head + o + "        - {value: a, requests_per_unit: 0}\n"),
            "edge.yaml:8: descriptor 'ip': rate_limit: override of value 'a': requests_per_unit "
            "must be an integer from 1 to 4294967295 (got '0')");
  EXPECT_EQ(error_for(head + o + "        - {value: a, unit: fortnight}\n"),
            "edge.yaml:8: descriptor 'ip': rate_limit: override of value 'a': unit must be "
            "second, minute, hour, day, week, month or year (got 'fortnight')");
  EXPECT_EQ(error_for("domain: edge\ndescriptors:\n  - key: ip\n    rate_limit:\n"
                      "      unit: minute\n      requests_per_unit: 0\n      overrides: []\n"),
            "edge.yaml:7: descriptor 'ip': rate_limit: overrides need requests_per_unit of at "
            "least 1");
  EXPECT_EQ(error_for("domain: edge\ndescriptors:\n  - key: ip\n    value: 10.*\n"
                      "    share_threshold: true\n    rate_limit:\n      unit: minute\n"
                      "      requests_per_unit: 3\n      overrides: [{value: 10.1, "
                      "requests_per_unit: 5}]\n"),
            "edge.yaml:6: descriptor 'ip_10.*': overrides cannot be used with share_threshold "
            "(every matching value counts on one counter)");
  std::string many = head + o;
  for (std::size_t i = 0; i <= max_overrides_per_rule; ++i)
    many += "        - {value: v" + std::to_string(i) + ", requests_per_unit: 5}\n";
  EXPECT_EQ(error_for(many),
            "edge.yaml:7: descriptor 'ip': rate_limit: at most 10000 overrides per rate_limit "
            "(got 10001)");
}

}  // namespace
}  // namespace floodgate::service::envoy
