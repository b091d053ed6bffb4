// The admin listener's pure parts: /v1/status from known counters, the p99 estimate, query
// decoding, key-request validation and the status page's headers.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "admin/admin.hpp"
#include "admin/status.hpp"
#include "admin/ui_page.hpp"
#include "config/config.hpp"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;

http_request get(std::string target) {
  return {"GET", std::move(target), {}, {}, "127.0.0.1"};
}

TEST(status, quantile_interpolates_inside_the_bucket) {
  metrics::latency_snapshot h;
  EXPECT_EQ(histogram_quantile(h, 0.99), -1);
  // 100 calls: 98 in (0, 0.1 ms], 2 in (0.5 ms, 1 ms]. The 99th is the first of those two:
  // halfway through that bucket.
  h.counts[0] = 98;
  h.counts[3] = 2;
  EXPECT_NEAR(histogram_quantile(h, 0.99), 0.0005 + 0.0005 * 0.5, 1e-12);
  EXPECT_NEAR(histogram_quantile(h, 0.5), 0.0001 * 50 / 98, 1e-12);
  EXPECT_NEAR(histogram_quantile(h, 1.0), 0.001, 1e-12);
  h.counts.back() = 1000;  // mostly beyond the last bound: reported as that bound
  EXPECT_EQ(histogram_quantile(h, 0.99), 1.0);
}

TEST(status, counters_of_each_rule_and_the_backend) {
  metrics m;
  for (int i = 0; i < 5; ++i) m.record_rule("api", verdict::allowed, 2, nullptr, false);
  for (int i = 0; i < 2; ++i) m.record_rule("api", verdict::denied, 1, nullptr, false);
  m.record_backend_call(200us, {});
  m.record_backend_call(400us, make_error_code(errc::timeout));
  config_store store(std::make_shared<const config>(
      parse_config("rules:\n  - {name: api, algorithm: sliding_log, limit: 20, window: 1h}\n"
                   "  - {name: idle, algorithm: gcra, limit: 5, window: 1s, shadow: true}\n",
                   "r.yaml")));
  admin_sources s{&m, [] { return backend_state{true, "redis", ""}; }, nullptr, &store};
  s.clocks = [] {
    return std::vector<node_clock>{{"127.0.0.1:6379", true, clock_sample{1500us, 400us}}};
  };
  const auto res = route_admin(get("/v1/status"), s);
  const auto& r = std::get<http_response>(res);
  ASSERT_EQ(r.status, 200);
  const auto o = boost::json::parse(r.body).as_object();
  const auto& rules = o.at("rules").as_array();
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].at("name"), "api");
  EXPECT_EQ(rules[0].at("decisions").at("allowed"), 5);
  EXPECT_EQ(rules[0].at("decisions").at("denied"), 2);
  EXPECT_EQ(rules[0].at("cost"), 10);
  EXPECT_EQ(rules[1].at("name"), "idle");  // never decided: zeros
  EXPECT_EQ(rules[1].at("decisions").at("allowed"), 0);
  EXPECT_EQ(rules[1].at("shadow"), true);
  EXPECT_EQ(rules[1].at("window_ms"), 1000);
  const auto& b = o.at("backend");
  EXPECT_EQ(b.at("calls"), 2);
  EXPECT_EQ(b.at("errors").at("timeout"), 1);
  EXPECT_NEAR(b.at("latency_mean_ms").as_double(), 0.3, 1e-9);
  const auto& c = o.at("clock").as_array().at(0);
  EXPECT_EQ(c.at("offset_ms"), 1.5);
  EXPECT_EQ(c.at("rtt_ms"), 0.4);
  EXPECT_EQ(o.at("top_keys").at("enabled"), false);
}

TEST(status, percent_decoding) {
  EXPECT_EQ(percent_decode("a+b%26c%3d%C3%A9"), "a b&c=\xc3\xa9");
  EXPECT_EQ(percent_decode(""), "");
  EXPECT_FALSE(percent_decode("%"));
  EXPECT_FALSE(percent_decode("%4"));
  EXPECT_FALSE(percent_decode("%g0"));
}

TEST(status, key_requests_are_validated) {
  metrics m;
  config_store store(std::make_shared<const config>(
      parse_config("rules:\n  - {name: api, algorithm: gcra, limit: 5, window: 1s}\n", "r.yaml")));
  admin_sources s{&m, {}, nullptr, &store};
  EXPECT_EQ(std::get<http_response>(route_admin(get("/v1/inspect?rule=api&key=k"), s)).status,
            404);  // no runner: inspection is off
  s.keys = true;
  s.max_key_size = 4;
  const auto ok = route_admin(get("/v1/inspect?key=a%2Bb&rule=api"), s);
  ASSERT_TRUE(std::holds_alternative<key_request>(ok));
  EXPECT_EQ(std::get<key_request>(ok).key, "a+b");
  EXPECT_EQ(std::get<key_request>(ok).rule->name(), "api");
  EXPECT_EQ(std::get<key_request>(ok).what, key_request::action::inspect);
  EXPECT_EQ(std::get<http_response>(route_admin(get("/v1/inspect?rule=api&key=abcde"), s)).status,
            400);
  http_request reset{"POST", "/v1/reset?rule=api&key=k", {}, {}, "127.0.0.1"};
  ASSERT_TRUE(std::holds_alternative<key_request>(route_admin(reset, s)));
  reset.headers.emplace_back("Origin", "http://127.0.0.1:9000");
  EXPECT_EQ(std::get<http_response>(route_admin(reset, s)).status, 403);
}

TEST(status, page_is_locked_down) {
  metrics m;
  admin_sources s{&m, {}};
  const auto r = std::get<http_response>(route_admin(get("/ui"), s));
  ASSERT_EQ(r.status, 200);
  const auto csp = std::string(r.header("Content-Security-Policy").value_or(""));
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
  // The nonce in the header is the one in the page's script tag, and new per response.
  const auto at = csp.find("'nonce-") + 7;
  const auto nonce = csp.substr(at, csp.find('\'', at) - at);
  EXPECT_EQ(nonce.size(), 32u);
  EXPECT_NE(r.body.find("<script nonce=\"" + nonce + "\">"), std::string::npos);
  const auto again = std::get<http_response>(route_admin(get("/ui"), s));
  EXPECT_EQ(again.body.find(nonce), std::string::npos);
  EXPECT_EQ(r.header("X-Content-Type-Options").value_or(""), "nosniff");
  EXPECT_NE(r.body.find("<meta name=\"viewport\""), std::string::npos);
  EXPECT_EQ(r.body.find("innerHTML"), std::string::npos);
  EXPECT_EQ(r.body.find("http"), std::string::npos);  // no external assets
}

}  // namespace
}  // namespace floodgate::service
