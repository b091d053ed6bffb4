// How `floodgate override set` names an Envoy rate_limit (envoy_rule_names.hpp), and a run-time
// entry under such a name deciding a value in the rate limit service (memory backend, its
// clock injected). The gRPC path with floodgated and Redis: rls_runtime_override_grpc_test.cpp.
#include "envoy_rule_names.hpp"

#include <gtest/gtest.h>

#include <future>

#include "config/runtime_overrides.hpp"
#include "envoy_config_parse.hpp"
#include "floodgate/limiter.hpp"
#include "rls_service.hpp"
#include "test_clock.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;

const char* nested = R"(
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: path
        rate_limit: {unit: second, requests_per_unit: 50}
  - key: path
    value: /login
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: odd
    value: "a,b=c:d%"
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: files
    value: /f/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
)";

TEST(envoy_rule_names, every_path_has_its_own_name_and_parses_back) {
  const auto cfg = config_text::parse(nested);
  const auto rules = envoy_override_rules(cfg);
  std::vector<std::string> names;
  for (const auto& [name, r] : rules) names.push_back(name);
  // Nested and top-level /login are apart; a key-only entry has no '='; the odd value is
  // escaped; unlimited, 0 and share_threshold rules take no override.
  EXPECT_EQ(names,
            (std::vector<std::string>{"envoy:edge:odd=a%2Cb%3Dc%3Ad%25", "envoy:edge:path=/login",
                                      "envoy:edge:tenant", "envoy:edge:tenant,path",
                                      "envoy:edge:tenant,path=/login"}));
  EXPECT_EQ(rules.at("envoy:edge:tenant,path=/login").policy.limit(), 5);
  EXPECT_EQ(rules.at("envoy:edge:path=/login").policy.limit(), 7);
  EXPECT_NE(rules.at("envoy:edge:tenant,path=/login").policy.name(),
            rules.at("envoy:edge:path=/login").policy.name());
  for (const auto& name : names) {
    std::string why;
    const auto p = parse_envoy_rule_name(name, why);
    ASSERT_TRUE(p) << name << ": " << why;
    EXPECT_EQ(envoy_rule_name(*p), name);
  }
  std::string why;
  const auto odd = parse_envoy_rule_name("envoy:edge:odd=a%2Cb%3Dc%3Ad%25", why);
  ASSERT_TRUE(odd);
  ASSERT_EQ(odd->entries.size(), 1u);
  EXPECT_EQ(odd->entries[0].value, "a,b=c:d%");
}

TEST(envoy_rule_names, bad_names_say_what_is_wrong) {
  for (const char* bad :
       {"edge:path", "envoy:edge", "envoy::path", "envoy:edge:", "envoy:edge:a,", "envoy:edge:=x",
        "envoy:edge:k=", "envoy:edge:k=%2", "envoy:edge:k=%zz"}) {
    std::string why;
    EXPECT_FALSE(parse_envoy_rule_name(bad, why)) << bad;
    EXPECT_NE(why.find("is not an Envoy rule name"), std::string::npos) << bad << ": " << why;
  }
}

// The rate limit service with a run-time table, on the memory backend.
struct live_service {
  explicit live_service(const char* text)
      : store(std::make_shared<const envoy_config>(config_text::parse(text))) {
    backend_options bo;
    bo.memory.clock = clock.fn();
    limiter_options lo;
    lo.clock = clock.fn();
    limiter = std::make_shared<floodgate::limiter>("memory://", bo, lo);
    rls_options o;
    o.live = &live;
    service = std::make_unique<rls_service>(limiter, store, o);
  }
  response check(const std::vector<descriptor_entry>& entries) {
    request req;
    req.domain = "edge";
    req.descriptors.push_back({entries, std::nullopt, std::nullopt});
    std::promise<rls_result> p;
    service->async_should_rate_limit(std::move(req), rls_service::clock::now() + 5s,
                                     [&p](rls_result r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    EXPECT_EQ(r.outcome, rls_result::kind::ok) << r.message;
    return r.response;
  }
  // Sets `limit` for `value` under the rate_limit named `name`, for an hour of the wall clock.
  std::optional<std::string> set(const std::string& name, const std::string& value,
                                 std::int64_t limit, match_kind kind = match_kind::exact) {
    const auto rules = envoy_override_rules(*store.get());
    const rule_lookup find = [&](std::string_view n) -> const rule* {
      const auto it = rules.find(n);
      return it == rules.end() ? nullptr : &it->second;
    };
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    override_spec spec{value, kind, {}, now + 3'600'000};
    spec.fields.limit = limit;
    return live.set(find, {name, std::move(spec)}, now);
  }

  test::test_clock clock;
  envoy_config_store store;
  runtime_overrides live;
  std::shared_ptr<floodgate::limiter> limiter;
  std::unique_ptr<rls_service> service;
};

TEST(envoy_runtime_overrides, an_entry_decides_its_value_before_the_files_overrides) {
  live_service s(R"(
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: user
        rate_limit:
          unit: hour
          requests_per_unit: 2
          overrides: [{value: vip, requests_per_unit: 3}]
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
)");
  const std::vector<descriptor_entry> vip = {{"tenant", "t1"}, {"user", "vip"}};
  EXPECT_EQ(s.check(vip).statuses.at(0).current_limit->requests_per_unit, 3u) << "the file's";
  ASSERT_EQ(s.set("envoy:edge:tenant,user", "vip", 4), std::nullopt);
  ASSERT_EQ(s.set("envoy:edge:tenant,user", "v", 9, match_kind::prefix), std::nullopt);
  // The run-time entry: limit 4 in the rule's unit; one of the file override's count (3, the
  // same fixed window) carried over as a reload's would, so 2 are left after this one.
  const auto r = s.check(vip);
  ASSERT_TRUE(r.statuses.at(0).current_limit);
  EXPECT_EQ(r.statuses[0].current_limit->requests_per_unit, 4u);
  EXPECT_EQ(r.statuses[0].current_limit->per, unit::hour);
  EXPECT_EQ(r.statuses[0].limit_remaining, 2u);
  EXPECT_EQ(
      s.check({{"tenant", "t1"}, {"user", "vx"}}).statuses[0].current_limit->requests_per_unit, 9u)
      << "a prefix entry";
  // The same value under the top-level user rule: another rule, untouched.
  EXPECT_EQ(s.check({{"user", "vip"}}).statuses[0].current_limit->requests_per_unit, 2u);
  ASSERT_TRUE(s.live.remove("envoy:edge:tenant,user", match_kind::exact, "vip"));
  EXPECT_EQ(s.check(vip).statuses[0].current_limit->requests_per_unit, 9u) << "the prefix 'v'";
  ASSERT_TRUE(s.live.remove("envoy:edge:tenant,user", match_kind::prefix, "v"));
  EXPECT_EQ(s.check(vip).statuses[0].current_limit->requests_per_unit, 3u) << "the file's again";
}

TEST(envoy_runtime_overrides, an_entry_sets_only_the_limit_and_needs_a_rule_that_counts) {
  live_service s(nested);
  const auto rules = envoy_override_rules(*s.store.get());
  const rule_lookup find = [&](std::string_view n) -> const rule* {
    const auto it = rules.find(n);
    return it == rules.end() ? nullptr : &it->second;
  };
  override_spec spec{"x", match_kind::exact, {}, 2'000};
  spec.fields.window = 1s;
  EXPECT_EQ(override_refusal(find, {"envoy:edge:tenant", spec}, 1'000),
            "override of rule 'envoy:edge:tenant' key 'x': an Envoy rule's override sets only the "
            "limit (requests per its unit)");
  EXPECT_EQ(s.set("envoy:edge:free", "x", 5), "no rule named 'envoy:edge:free'") << "unlimited";
  EXPECT_EQ(s.set("envoy:edge:files=/f/*", "/f/1", 5), "no rule named 'envoy:edge:files=/f/*'")
      << "share_threshold: one counter for every value";
  EXPECT_EQ(s.set("envoy:other:tenant", "x", 5), "no rule named 'envoy:other:tenant'");
}

// After a reload that changes the rate_limit, an entry built on the old one is not used until
// it is rebuilt (floodgated rebinds at once): a state is never read in another policy's units.
TEST(envoy_runtime_overrides, an_entry_built_on_another_version_of_the_rule_is_not_used) {
  live_service s(
      "domain: edge\ndescriptors:\n  - key: user\n"
      "    rate_limit: {unit: hour, requests_per_unit: 2}\n");
  ASSERT_EQ(s.set("envoy:edge:user", "vip", 10), std::nullopt);
  EXPECT_EQ(s.check({{"user", "vip"}}).statuses[0].current_limit->requests_per_unit, 10u);
  s.store.set(std::make_shared<const envoy_config>(
      config_text::parse("domain: edge\ndescriptors:\n  - key: user\n"
                         "    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: gcra}\n")));
  EXPECT_EQ(s.check({{"user", "vip"}}).statuses[0].current_limit->requests_per_unit, 2u);
  const auto rules = envoy_override_rules(*s.store.get());
  EXPECT_TRUE(s.live
                  .rebind(
                      [&](std::string_view n) -> const rule* {
                        const auto it = rules.find(n);
                        return it == rules.end() ? nullptr : &it->second;
                      },
                      0)
                  .empty());
  EXPECT_EQ(s.check({{"user", "vip"}}).statuses[0].current_limit->requests_per_unit, 10u);
}

}  // namespace
}  // namespace floodgate::service::envoy
