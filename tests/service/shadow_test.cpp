// Shadow rules: parsed, kept out of all-or-nothing checks, always answered as allowed.
#include "api/shadow.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "api/render.hpp"
#include "config/config.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service {
namespace {

const char* rules_yaml =
    "rules:\n"
    "  - {name: api, algorithm: gcra, limit: 10, window: 1s}\n"
    "  - {name: new-limit, algorithm: sliding_log, limit: 5, window: 1m, shadow: true}\n"
    "  - {name: strict, algorithm: sliding_log, limit: 5, window: 1m, shadow: false}\n";

std::shared_ptr<const config> rules() {
  return std::make_shared<const config>(parse_config(rules_yaml, "rules.yaml"));
}

std::string error_for(const std::string& text) {
  try {
    parse_config(text, "rules.yaml");
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

check_plan plan_for(const http_request& req, std::shared_ptr<const config> cfg) {
  auto r = route(req, std::move(cfg));
  if (auto* p = std::get_if<check_plan>(&r)) return std::move(*p);
  ADD_FAILURE() << "not a check";
  return {};
}

http_request check(std::string body) {
  return {"POST", "/v1/check", {{"Content-Type", "application/json"}}, std::move(body), "10.0.0.9"};
}

TEST(shadow, parsed_from_the_rule) {
  const auto cfg = rules();
  EXPECT_FALSE(cfg->find("api")->shadow);
  EXPECT_TRUE(cfg->find("new-limit")->shadow);
  EXPECT_FALSE(cfg->find("strict")->shadow);
  EXPECT_EQ(error_for("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s,\n"
                      "     shadow: maybe}\n"),
            "rules.yaml:3: rule 'a': shadow must be true or false (got 'maybe')");
  EXPECT_EQ(error_for("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s, shadow: true}\n"
                      "  - {name: b, algorithm: gcra, limit: 1, window: 1s}\n"
                      "groups:\n  - {name: g, rules: [b,\n     a]}\n"),
            "rules.yaml:6: group 'g': rule 'a' is a shadow rule, which is checked alone (a "
            "group's denial by it would be enforced)");
}

TEST(shadow, refused_in_a_rules_list) {
  auto r = route(check(R"({"rules":[{"rule":"api","key":"k"},{"rule":"new-limit","key":"k"}]})"),
                 rules());
  auto* res = std::get_if<http_response>(&r);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("rules[1]: rule 'new-limit' is a shadow rule"), std::string::npos)
      << res->body;
}

TEST(shadow, a_denial_is_answered_as_allowed_and_reported) {
  const auto cfg = rules();
  const auto plan = plan_for(check(R"({"rule":"new-limit","key":"k"})"), cfg);
  ASSERT_TRUE(is_shadow(plan));
  const decision over{false, 5, 0, std::chrono::milliseconds(60000),
                      std::chrono::milliseconds(12000)};
  const auto res = render(plan, {outcome::over_limit, {over}, {}});
  EXPECT_EQ(res.status, 200);
  const auto body = boost::json::parse(res.body).as_object();
  EXPECT_EQ(body.at("allowed"), true);
  EXPECT_EQ(body.at("shadow_denied"), true);
  EXPECT_EQ(body.at("retry_after_ms"), 0);
  EXPECT_EQ(body.at("remaining"), 0);
  EXPECT_FALSE(res.header("Retry-After"));
  EXPECT_FALSE(res.header("RateLimit"));
  EXPECT_FALSE(res.header("RateLimit-Policy"));

  const decision ok{true, 5, 4, std::chrono::milliseconds(60000), {}};
  const auto allowed = render(plan, {outcome::allowed, {ok}, {}});
  EXPECT_EQ(allowed.status, 200);
  EXPECT_FALSE(boost::json::parse(allowed.body).as_object().contains("shadow_denied"));

  // The backend failed and the rule fails closed: still allowed, marked degraded.
  const decision closed{false, 5, 0, {}, {}};
  const auto failed =
      render(plan, {outcome::backend_error, {closed}, make_error_code(errc::timeout)});
  EXPECT_EQ(failed.status, 200);
  const auto fb = boost::json::parse(failed.body).as_object();
  EXPECT_EQ(fb.at("degraded"), true);
  EXPECT_FALSE(fb.contains("shadow_denied"));

  // nginx: 204 either way.
  const auto auth = plan_for({"GET", "/v1/auth/new-limit", {}, "", "10.0.0.9"}, cfg);
  EXPECT_EQ(render(auth, {outcome::over_limit, {over}, {}}).status, 204);

  // An enforced rule still refuses.
  const auto strict = plan_for(check(R"({"rule":"strict","key":"k"})"), cfg);
  EXPECT_FALSE(is_shadow(strict));
  EXPECT_EQ(render(strict, {outcome::over_limit, {over}, {}}).status, 429);
}

}  // namespace
}  // namespace floodgate::service
