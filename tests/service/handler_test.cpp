// The pure handler: request → plan or error, (plan, decision) → response. No sockets.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "api/ratelimit_headers.hpp"
#include "api/render.hpp"
#include "api/request_framing.hpp"
#include "api/route.hpp"
#include "floodgate/floodgate.hpp"
#include "telemetry/metrics.hpp"
#include "telemetry/observe.hpp"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

// The peer of every test request (10.0.0.9) is a trusted proxy unless a test says otherwise.
std::shared_ptr<const config> test_rules(std::vector<std::string> trusted = {"10.0.0.0/24"}) {
  std::vector<rule> rules;
  rules.push_back(
      {policy("api", algorithm::sliding_log, 100, 60s, std::nullopt, failure_mode::open),
       {key_source::kind::header, "X-Api-Key"},
       std::nullopt});
  rules.push_back(
      {policy("ip", algorithm::gcra, 10, 1s, 20, failure_mode::closed), {}, std::nullopt});
  rules.push_back({policy("fast", algorithm::fixed_window, 3, 500ms), {}, std::nullopt});
  rules.push_back({policy("exports", algorithm::fixed_window, 1, 1ms),
                   {},
                   concurrency_policy("exports", 2, 30s)});
  // Groups: "signup" (every rule on the client address), "mixed" (one per key source).
  std::vector<group> groups{{"signup", {2, 1}}, {"mixed", {0, 1}}};
  std::vector<cidr> proxies;
  for (const auto& t : trusted) proxies.push_back(parse_cidr(t).value());
  return std::make_shared<const config>(std::move(rules), std::move(groups), std::move(proxies));
}

http_request post_check(std::string body) {
  return {"POST", "/v1/check", {{"Content-Type", "application/json"}}, std::move(body), "10.0.0.9"};
}

http_request get_auth(std::string rule, header_list headers = {}) {
  return {"GET", "/v1/auth/" + rule, std::move(headers), "", "10.0.0.9"};
}

// The error response a request routes to; fails the test if it routes anywhere else.
http_response routed_error(const http_request& req) {
  auto r = route(req, test_rules());
  if (auto* res = std::get_if<http_response>(&r)) return *res;
  ADD_FAILURE() << "expected an error response for " << req.target << " " << req.body;
  return {};
}

check_plan routed_plan(const http_request& req,
                       std::shared_ptr<const config> rules = test_rules()) {
  auto r = route(req, std::move(rules));
  if (auto* plan = std::get_if<check_plan>(&r)) return std::move(*plan);
  if (auto* res = std::get_if<http_response>(&r))
    ADD_FAILURE() << res->status << " " << res->body;
  else
    ADD_FAILURE() << "routed to a probe";
  return {};
}

json::object body_of(const http_response& res) {
  EXPECT_EQ(res.header("Content-Type").value_or(""), "application/json");
  return json::parse(res.body).as_object();
}

std::string error_of(const http_response& res) {
  auto o = body_of(res);
  EXPECT_TRUE(o.contains("error")) << res.body;
  return o.contains("error") ? std::string(o["error"].as_string()) : "";
}

decision make_decision(bool allowed, std::int64_t limit, std::int64_t remaining,
                       std::chrono::milliseconds reset, std::chrono::milliseconds retry) {
  return {allowed, limit, remaining, reset, retry};
}

multi_check_result result_of(outcome o, std::vector<decision> d, std::error_code ec = {}) {
  return {o, std::move(d), ec};
}

// --- request parsing -------------------------------------------------------------------------

TEST(route, single_check_defaults_cost_to_one) {
  const auto plan = routed_plan(post_check(R"({"rule": "api", "key": "alice"})"));
  EXPECT_EQ(plan.kind, check_plan::style::json);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].rule->name(), "api");
  EXPECT_EQ(plan.items[0].key, "alice");
  EXPECT_EQ(plan.items[0].cost, 1);
  const auto items = plan.check_items();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].key, "alice");
  EXPECT_EQ(items[0].policy, &plan.items[0].rule->policy);
}

TEST(route, cost_zero_peeks_and_cost_up_to_capacity_is_accepted) {
  EXPECT_EQ(routed_plan(post_check(R"({"rule":"api","key":"a","cost":0})")).items[0].cost, 0);
  EXPECT_EQ(routed_plan(post_check(R"({"rule":"api","key":"a","cost":100})")).items[0].cost, 100);
  // gcra's capacity is its burst (20), not its limit (10).
  EXPECT_EQ(routed_plan(post_check(R"({"rule":"ip","key":"a","cost":20})")).items[0].cost, 20);
}

// {"rule": "api", "key": "a", "m0": 0, ..., "m<n-1>": 0} and then `again` repeated (if any).
std::string many_members(int n, const std::string& again) {
  std::string body = R"({"rule": "api", "key": "a")";
  for (int i = 0; i < n; ++i) body += ", \"m" + std::to_string(i) + "\": 0";
  if (!again.empty()) body += ", \"" + again + "\": 1";
  return body + "}";
}

TEST(route, malformed_and_mistyped_bodies_are_400_with_a_reason) {
  struct bad {
    std::string body;
    std::string says;
  };
  const std::vector<bad> cases = {
      {"", "malformed JSON"},
      {"{\"rule\": \"api\",", "malformed JSON"},
      {"not json", "malformed JSON"},
      {"[1, 2]", "must be a JSON object"},
      {"\"api\"", "must be a JSON object"},
      {R"({"key": "a"})", "missing field 'rule'"},
      {R"({"rule": "api"})", "missing field 'key'"},
      {R"({"rule": 7, "key": "a"})", "'rule' must be a string"},
      {R"({"rule": "nope", "key": "a"})", "unknown rule 'nope'"},
      {R"({"rule": "api", "key": 42})", "'key' must be a string"},
      {R"({"rule": "api", "key": null})", "'key' must be a string"},
      {R"({"rule": "api", "key": ""})", "'key' must not be empty"},
      {R"({"rule": "api", "key": "a", "cost": "1"})", "'cost' must be an integer"},
      {R"({"rule": "api", "key": "a", "cost": 1.5})", "'cost' must be an integer"},
      {R"({"rule": "api", "key": "a", "cost": true})", "'cost' must be an integer"},
      {R"({"rule": "api", "key": "a", "cost": -1})", "must not be negative"},
      {R"({"rule": "api", "key": "a", "cost": 101})", "exceeds the capacity of rule 'api' (100)"},
      {R"({"rule": "ip", "key": "a", "cost": 21})", "exceeds the capacity of rule 'ip' (20)"},
      {R"({"rule": "api", "key": "a", "cost": 18446744073709551615})", "exceeds the capacity"},
      {R"({"rule": "api", "key": "a", "colour": "red"})", "unknown field 'colour'"},
      {R"({"rule": "api", "key": "a", "rules": []})", "not both"},
      {R"({"rules": {}})", "'rules' must be a list"},
      {R"({"rules": []})", "'rules' must not be empty"},
      {R"({"rules": [1]})", "rules[0]: must be a {"},
      {R"({"rules": [{"rule": "api"}]})", "rules[0]: missing field 'key'"},
      {R"({"rules": [{"rule": "api", "key": "a"}, {"rule": "api", "key": "a"}]})",
       "rules[1]: rule 'api' with this key appears twice"},
      {R"({"a": {"b": {"c": {"d": {"e": 1}}}}})", "malformed JSON"},  // too deep
      {R"({"rule": "api", "key": "a"} {})", "malformed JSON"},        // more after it
      // Duplicate member names: one reader takes the first, another the last.
      {R"({"rule": "api", "key": "a", "rule": "ip"})", "duplicate field 'rule'"},
      {R"({"rule": "api", "key": "a", "key": "a"})", "duplicate field 'key'"},
      {R"({"rule": "api", "cost": 1, "key": "a", "cost": 2})", "duplicate field 'cost'"},
      {R"({"rules": [{"rule": "api", "key": "a", "key": "b"}]})", "duplicate field 'key'"},
      {R"({"group": "signup", "key": "a", "group": "mixed"})", "duplicate field 'group'"},
      {R"({"r\u0075le": "api", "key": "a", "rule": "ip"})", "duplicate field 'rule'"},
      // Past 16 members the names are in a hash set (json_parse.cpp): found there too.
      {many_members(40, "m3"), "duplicate field 'm3'"},
      {many_members(40, "m39"), "duplicate field 'm39'"},
      {many_members(40, ""), "unknown field 'm0'"},  // no duplicate: on to the fields
  };
  for (const auto& c : cases) {
    const auto res = routed_error(post_check(c.body));
    EXPECT_EQ(res.status, 400) << c.body;
    EXPECT_NE(error_of(res).find(c.says), std::string::npos)
        << c.body << " → " << res.body << " (expected to mention: " << c.says << ")";
  }
}

TEST(route, keys_have_a_length_cap) {
  request_limits limits;
  limits.max_key_size = 8;
  auto ok = route(post_check(R"({"rule":"api","key":"12345678"})"), test_rules(), limits);
  EXPECT_TRUE(std::holds_alternative<check_plan>(ok));
  auto long_key = route(post_check(R"({"rule":"api","key":"123456789"})"), test_rules(), limits);
  ASSERT_TRUE(std::holds_alternative<http_response>(long_key));
  EXPECT_EQ(std::get<http_response>(long_key).status, 400);
  EXPECT_NE(std::get<http_response>(long_key).body.find("longer than 8 bytes"), std::string::npos);
}

TEST(route, multi_check_has_an_item_cap) {
  request_limits limits;
  limits.max_items = 2;
  const std::string three =
      R"({"rules":[{"rule":"api","key":"a"},{"rule":"api","key":"b"},{"rule":"api","key":"c"}]})";
  auto r = route(post_check(three), test_rules(), limits);
  ASSERT_TRUE(std::holds_alternative<http_response>(r));
  EXPECT_EQ(std::get<http_response>(r).status, 400);
  EXPECT_NE(std::get<http_response>(r).body.find("at most 2"), std::string::npos);
}

TEST(route, multi_check_keeps_order_and_costs) {
  const auto plan = routed_plan(post_check(
      R"({"rules":[{"rule":"api","key":"alice","cost":2},{"rule":"ip","key":"10.1.1.1"}]})"));
  EXPECT_EQ(plan.kind, check_plan::style::json_multi);
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(plan.items[0].rule->name(), "api");
  EXPECT_EQ(plan.items[0].cost, 2);
  EXPECT_EQ(plan.items[1].rule->name(), "ip");
  EXPECT_EQ(plan.items[1].key, "10.1.1.1");
  EXPECT_EQ(plan.items[1].cost, 1);
}

TEST(route, auth_takes_the_key_from_the_rules_header) {
  const auto plan = routed_plan(get_auth("api", {{"x-api-key", "k-123"}}));
  EXPECT_EQ(plan.kind, check_plan::style::auth);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].key, "k-123");
  EXPECT_EQ(plan.items[0].cost, 1);
  // The query string is not part of the rule name.
  EXPECT_EQ(routed_plan(get_auth("api?from=nginx", {{"X-Api-Key", "k"}})).items[0].rule->name(),
            "api");
  auto head = get_auth("api", {{"X-Api-Key", "k"}});
  head.method = "HEAD";
  const auto peek = routed_plan(head);
  EXPECT_EQ(peek.items[0].key, "k");
  EXPECT_TRUE(peek.peek);
  EXPECT_EQ(peek.items[0].cost, 0) << "HEAD is safe: it consumes nothing";
  EXPECT_FALSE(routed_plan(get_auth("api", {{"X-Api-Key", "k"}})).peek);
}

// RFC 9110 2.5: the version the parser refused, read again from the request's raw bytes.
TEST(route, an_unknown_http_1_minor_version_reads_as_1_1_and_another_major_as_505) {
  using v = refused_version::verdict;
  const std::string req = "GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n";
  const auto r = reread_version(req);
  EXPECT_EQ(r.what, v::serve_as_1_1);
  EXPECT_EQ(r.minor_at, req.find("1.2") + 2);
  EXPECT_EQ(reread_version("GET * HTTP/1.9\r\n\r\n").what, v::serve_as_1_1);
  for (const char* other : {"GET / HTTP/2.0\r\n", "GET / HTTP/0.9\r\n", "GET / HTTP/9.9\r\n"})
    EXPECT_EQ(reread_version(other).what, v::not_supported) << other;
  for (const char* bad : {"GET / HTTP/1.12\r\n", "GET / HTTP/1.x\r\n", "GET / HTTPS/1.2\r\n",
                          "GET / HTTP/1.1\r\n", "GET / HTTP/1.2", "garbage\r\n", ""})
    EXPECT_EQ(reread_version(bad).what, v::malformed) << bad;
}

TEST(route, options_star_is_the_server_wide_options) {
  http_request req{"OPTIONS", "*", {}, "", "10.0.0.9"};
  auto res = routed_error(req);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.header("Allow").value_or(""), "GET, HEAD, POST, OPTIONS");
  EXPECT_EQ(res.body, "");
  req.method = "GET";
  EXPECT_EQ(routed_error(req).status, 400);
}

TEST(route, auth_without_the_key_header_is_400) {
  const auto missing = routed_error(get_auth("api"));
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(error_of(missing).find("missing header X-Api-Key"), std::string::npos);
  const auto empty = routed_error(get_auth("api", {{"X-Api-Key", ""}}));
  EXPECT_EQ(empty.status, 400);
  EXPECT_NE(error_of(empty).find("is empty"), std::string::npos);
}

std::string ip_key(const header_list& headers, std::vector<std::string> trusted,
                   std::string peer = "10.0.0.9") {
  auto req = get_auth("ip", headers);
  req.peer_address = std::move(peer);
  return routed_plan(req, test_rules(std::move(trusted))).items[0].key;
}

TEST(route, auth_remote_addr_is_the_peer_unless_the_peer_is_a_trusted_proxy) {
  const header_list real_ip = {{"X-Real-IP", "203.0.113.7"}};
  const header_list forwarded = {{"X-Forwarded-For", "203.0.113.7"}};
  // Nobody trusted (the default): the headers are ignored, whatever they say.
  EXPECT_EQ(ip_key({}, {}), "10.0.0.9");
  EXPECT_EQ(ip_key(real_ip, {}), "10.0.0.9");
  EXPECT_EQ(ip_key(forwarded, {}), "10.0.0.9");
  EXPECT_EQ(ip_key({{"X-Real-IP", "garbage"}}, {}), "10.0.0.9");
  // A peer outside the list likewise.
  EXPECT_EQ(ip_key(real_ip, {"10.0.1.0/24", "::1"}), "10.0.0.9");
  // A trusted peer: X-Real-IP first, else X-Forwarded-For, else the peer itself.
  EXPECT_EQ(ip_key(real_ip, {"10.0.0.9"}), "203.0.113.7");
  EXPECT_EQ(
      ip_key({{"X-Real-IP", "203.0.113.7"}, {"X-Forwarded-For", "198.51.100.1"}}, {"10.0.0.9"}),
      "203.0.113.7");
  EXPECT_EQ(ip_key(forwarded, {"10.0.0.0/8"}), "203.0.113.7");
  EXPECT_EQ(ip_key({}, {"10.0.0.0/8"}), "10.0.0.9");
  // IPv6 peers and ranges.
  EXPECT_EQ(ip_key(real_ip, {"2001:db8::/32"}, "2001:db8::1"), "203.0.113.7");
  EXPECT_EQ(ip_key(real_ip, {"2001:db8::/32"}, "2001:db9::1"), "2001:db9::1");
  // A dual-stack listener's IPv4-mapped peer is its IPv4 address.
  EXPECT_EQ(ip_key(real_ip, {"127.0.0.1"}, "::ffff:127.0.0.1"), "203.0.113.7");
  EXPECT_EQ(ip_key({}, {}, "::ffff:192.0.2.1"), "192.0.2.1");
}

// X-Forwarded-For lists every hop, the client's own claims first: only the entries our trusted
// proxies appended are believed, so the key is the rightmost address not in the list.
TEST(route, auth_x_forwarded_for_is_read_from_the_right) {
  const std::vector<std::string> proxies = {"10.0.0.0/8"};
  EXPECT_EQ(ip_key({{"X-Forwarded-For", "1.2.3.4, 203.0.113.7, 10.0.0.1"}}, proxies),
            "203.0.113.7");
  EXPECT_EQ(ip_key({{"X-Forwarded-For", "203.0.113.7,10.9.9.9 ,\t10.0.0.1"}}, proxies),
            "203.0.113.7");
  // Several lines are one list, in order.
  EXPECT_EQ(ip_key({{"X-Forwarded-For", "1.2.3.4, 203.0.113.7"}, {"X-Forwarded-For", "10.0.0.1"}},
                   proxies),
            "203.0.113.7");
  // Every hop trusted: the leftmost is as far back as anyone knows.
  EXPECT_EQ(ip_key({{"X-Forwarded-For", "10.1.1.1, 10.0.0.1"}}, proxies), "10.1.1.1");
  // Keys are canonical: one client, one key, however it is written.
  EXPECT_EQ(ip_key({{"X-Forwarded-For", "2001:DB8:0:0::7"}}, proxies), "2001:db8::7");
  EXPECT_EQ(ip_key({{"X-Real-IP", "::ffff:203.0.113.7"}}, proxies), "203.0.113.7");
}

TEST(route, auth_a_forwarded_value_that_is_not_an_address_is_400) {
  for (const header_list& h : std::vector<header_list>{
           {{"X-Real-IP", "alice"}},
           {{"X-Real-IP", ""}},
           {{"X-Real-IP", "203.0.113.7:443"}},
           {{"X-Real-IP", "[2001:db8::1]"}},
           {{"X-Real-IP", " 203.0.113.7"}},
           {{"X-Forwarded-For", "203.0.113.7, unknown"}},
           {{"X-Forwarded-For", "_hidden, 10.0.0.1"}},
       }) {
    const auto res = routed_error(get_auth("ip", h));
    EXPECT_EQ(res.status, 400) << h[0].second;
    EXPECT_NE(error_of(res).find("is not an IP address"), std::string::npos) << error_of(res);
  }
  // A chain longer than any real one is refused too (not walked).
  std::string chain;
  for (int i = 0; i < 70; ++i) chain += "10.0.0." + std::to_string(i) + ",";
  EXPECT_EQ(routed_error(get_auth("ip", {{"X-Forwarded-For", chain}})).status, 400);
}

TEST(route, auth_unknown_rule_is_404_and_wrong_method_405) {
  EXPECT_EQ(routed_error(get_auth("nope")).status, 404);
  EXPECT_EQ(routed_error(get_auth("")).status, 404);
  auto post = get_auth("api", {{"X-Api-Key", "k"}});
  post.method = "POST";
  const auto res = routed_error(post);
  EXPECT_EQ(res.status, 405);
  EXPECT_EQ(res.header("Allow").value_or(""), "GET, HEAD");
}

// Error messages quote the caller's bytes; the JSON body stays valid UTF-8 whatever they are
// (found by fuzz_http_request: a path of raw bytes made an error body no JSON parser accepts).
TEST(route, error_bodies_are_valid_utf8_whatever_the_request_holds) {
  for (std::string name : {"m\xff\xfe", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf"}) {
    const auto res = routed_error(get_auth(name));
    EXPECT_EQ(res.status, 404);
    const auto error = std::string(body_of(res).at("error").as_string());
    EXPECT_NE(error.find("\xEF\xBF\xBD"), std::string::npos) << error;
  }
  // Valid UTF-8, cut by the 64-byte quote in the middle of a character: the cut one is replaced.
  std::string long_name;
  for (int i = 0; i < 40; ++i) long_name += "\xc3\xa9";
  const auto res = routed_error(post_check(R"({"rule":")" + long_name + R"(","key":"k"})"));
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(std::string(body_of(res).at("error").as_string()).find("\xc3\xa9"), std::string::npos);
}

TEST(route, auth_on_a_group_checks_each_rule_with_its_own_key) {
  const auto plan =
      routed_plan(get_auth("mixed", {{"X-Api-Key", "k-1"}, {"X-Real-IP", "203.0.113.7"}}));
  EXPECT_EQ(plan.kind, check_plan::style::auth);
  ASSERT_NE(plan.group, nullptr);
  EXPECT_EQ(plan.group->name, "mixed");
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(plan.items[0].rule->name(), "api");
  EXPECT_EQ(plan.items[0].key, "k-1");
  EXPECT_EQ(plan.items[1].rule->name(), "ip");
  EXPECT_EQ(plan.items[1].key, "203.0.113.7");

  const auto missing = routed_error(get_auth("mixed"));
  EXPECT_EQ(missing.status, 400) << "one rule's key is missing: the whole group is refused";
  EXPECT_NE(error_of(missing).find("missing header X-Api-Key (rule 'api'"), std::string::npos);
  EXPECT_EQ(routed_error(get_auth("nobody")).status, 404);
  EXPECT_EQ(error_of(routed_error(get_auth("nobody"))), "unknown rule or group 'nobody'");
}

TEST(route, check_on_a_group_gives_every_rule_the_one_key_and_cost) {
  const auto plan = routed_plan(post_check(R"({"group":"signup","key":"10.2.2.2","cost":3})"));
  EXPECT_EQ(plan.kind, check_plan::style::json_multi);
  ASSERT_NE(plan.group, nullptr);
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(plan.items[0].rule->name(), "fast") << "in the group's order";
  EXPECT_EQ(plan.items[1].rule->name(), "ip");
  for (const auto& item : plan.items) {
    EXPECT_EQ(item.key, "10.2.2.2");
    EXPECT_EQ(item.cost, 3);
  }
  EXPECT_EQ(routed_plan(post_check(R"({"group":"signup","key":"a"})")).items[1].cost, 1);

  struct bad {
    std::string body;
    std::string says;
  };
  for (const auto& c : std::vector<bad>{
           {R"({"group":"nope","key":"a"})", "unknown group 'nope'"},
           {R"({"group":5,"key":"a"})", "'group' must be a string"},
           {R"({"group":"signup"})", "missing field 'key'"},
           {R"({"group":"signup","key":""})", "'key' must not be empty"},
           {R"({"group":"signup","key":"a","rule":"ip"})",
            "give one of 'group', 'rules' or 'rule'"},
           {R"({"group":"signup","key":"a","extra":1})",
            "unknown field 'extra' (a group check takes group, key, cost)"},
           {R"({"group":"signup","key":"a","cost":4})",
            "'cost' exceeds the capacity of rule 'fast' (3): it could never be admitted"},
       }) {
    const auto res = routed_error(post_check(c.body));
    EXPECT_EQ(res.status, 400) << c.body;
    EXPECT_EQ(error_of(res), c.says) << c.body;
  }
}

TEST(route, check_wants_post) {
  const auto res = routed_error({"GET", "/v1/check", {}, "", "1.1.1.1"});
  EXPECT_EQ(res.status, 405);
  EXPECT_EQ(res.header("Allow").value_or(""), "POST");
}

TEST(route, probes_and_unknown_paths) {
  auto probe_of = [](std::string method, std::string target) {
    return route({std::move(method), std::move(target), {}, "", "1.1.1.1"}, test_rules());
  };
  EXPECT_EQ(std::get<probe>(probe_of("GET", "/healthz")), probe::healthz);
  EXPECT_EQ(std::get<probe>(probe_of("GET", "/readyz")), probe::readyz);
  EXPECT_EQ(std::get<probe>(probe_of("HEAD", "/metrics")), probe::metrics);
  EXPECT_EQ(std::get<http_response>(probe_of("POST", "/metrics")).status, 405);
  EXPECT_EQ(std::get<http_response>(probe_of("GET", "/")).status, 404);
  EXPECT_EQ(std::get<http_response>(probe_of("GET", "/v1/checks")).status, 404);
  EXPECT_EQ(std::get<http_response>(probe_of("GET", "/v1/auth")).status, 404);
}

// --- rendering -------------------------------------------------------------------------------

TEST(render, allowed_check_is_200_with_ratelimit_headers) {
  const auto plan = routed_plan(post_check(R"({"rule":"api","key":"alice"})"));
  const auto res =
      render(plan, result_of(outcome::allowed, {make_decision(true, 100, 99, 60000ms, 0ms)}));
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(
      res.body,
      R"({"allowed":true,"limit":100,"remaining":99,"reset_after_ms":60000,"retry_after_ms":0})"
      "\n");
  EXPECT_EQ(res.header("RateLimit-Policy").value_or(""), R"("api";q=100;w=60)");
  EXPECT_EQ(res.header("RateLimit").value_or(""), R"("api";r=99;t=60)");
  EXPECT_FALSE(res.header("Retry-After"));
}

// HEAD /v1/auth: a peek is allowed by the backend whatever is left; the answer is whether a GET
// of cost 1 would be, without Retry-After (a peek does not learn when).
TEST(render, a_peek_is_204_while_one_is_left_and_403_without_retry_after_when_none_is) {
  auto head = get_auth("fast");
  head.method = "HEAD";
  const auto plan = routed_plan(head);
  const auto left =
      render(plan, result_of(outcome::allowed, {make_decision(true, 3, 1, 400ms, 0ms)}));
  EXPECT_EQ(left.status, 204);
  const auto none =
      render(plan, result_of(outcome::allowed, {make_decision(true, 3, 0, 400ms, 0ms)}));
  EXPECT_EQ(none.status, 403);
  EXPECT_EQ(none.header("RateLimit").value_or(""), R"("fast";r=0;t=1)");
  EXPECT_FALSE(none.header("Retry-After"));
}

TEST(render, denied_check_is_429_with_retry_after_rounded_up) {
  const auto plan = routed_plan(post_check(R"({"rule":"api","key":"alice"})"));
  const auto res =
      render(plan, result_of(outcome::over_limit, {make_decision(false, 100, 0, 59001ms, 1001ms)}));
  EXPECT_EQ(res.status, 429);
  auto body = body_of(res);
  EXPECT_EQ(body["allowed"].as_bool(), false);
  EXPECT_EQ(body["remaining"].as_int64(), 0);
  EXPECT_EQ(body["retry_after_ms"].as_int64(), 1001);
  EXPECT_EQ(body["reset_after_ms"].as_int64(), 59001);
  EXPECT_FALSE(body.contains("degraded"));
  EXPECT_EQ(res.header("Retry-After").value_or(""), "2");
  EXPECT_EQ(res.header("RateLimit").value_or(""), R"("api";r=0;t=60)");
}

TEST(render, fail_open_backend_error_is_200_degraded_without_live_counters) {
  const auto plan = routed_plan(post_check(R"({"rule":"api","key":"alice"})"));
  const auto res =
      render(plan, result_of(outcome::backend_error, {make_decision(true, 100, 0, 0ms, 0ms)},
                             make_error_code(errc::timeout)));
  EXPECT_EQ(res.status, 200);
  auto body = body_of(res);
  EXPECT_EQ(body["allowed"].as_bool(), true);
  EXPECT_EQ(body["degraded"].as_bool(), true);
  EXPECT_EQ(res.header("RateLimit-Policy").value_or(""), R"("api";q=100;w=60)");
  EXPECT_FALSE(res.header("RateLimit")) << "we know nothing about the counters";
  EXPECT_FALSE(res.header("Retry-After"));
}

TEST(render, fail_closed_backend_error_is_503) {
  const auto plan = routed_plan(post_check(R"({"rule":"ip","key":"1.2.3.4"})"));
  const auto res =
      render(plan, result_of(outcome::backend_error, {make_decision(false, 20, 0, 0ms, 0ms)},
                             make_error_code(errc::not_connected)));
  EXPECT_EQ(res.status, 503);
  EXPECT_NE(error_of(res).find("backend unavailable"), std::string::npos);
  EXPECT_FALSE(res.header("RateLimit"));
  EXPECT_FALSE(res.header("Retry-After"));
}

TEST(render, invalid_request_result_is_400) {
  const auto plan = routed_plan(post_check(R"({"rule":"api","key":"alice"})"));
  const auto res =
      render(plan, result_of(outcome::invalid_request, {}, make_error_code(errc::duplicate_item)));
  EXPECT_EQ(res.status, 400);
  EXPECT_FALSE(error_of(res).empty());
  EXPECT_FALSE(res.header("RateLimit-Policy"));
}

TEST(render, auth_answers_204_or_403_for_nginx) {
  const auto plan = routed_plan(get_auth("ip", {{"X-Real-IP", "1.2.3.4"}}));
  const auto ok =
      render(plan, result_of(outcome::allowed, {make_decision(true, 20, 19, 100ms, 0ms)}));
  EXPECT_EQ(ok.status, 204);
  EXPECT_TRUE(ok.body.empty());
  EXPECT_EQ(ok.header("RateLimit-Policy").value_or(""), R"("ip";q=10;w=1)");
  EXPECT_EQ(ok.header("RateLimit").value_or(""), R"("ip";r=19;t=1)");

  const auto no =
      render(plan, result_of(outcome::over_limit, {make_decision(false, 20, 0, 2000ms, 100ms)}));
  EXPECT_EQ(no.status, 403);
  EXPECT_EQ(no.header("Retry-After").value_or(""), "1");
  EXPECT_EQ(no.header("RateLimit").value_or(""), R"("ip";r=0;t=2)");

  const auto down =
      render(plan, result_of(outcome::backend_error, {make_decision(false, 20, 0, 0ms, 0ms)},
                             make_error_code(errc::timeout)));
  EXPECT_EQ(down.status, 503);
}

TEST(render, multi_check_reports_the_combined_verdict_and_each_rule) {
  const auto plan = routed_plan(post_check(
      R"({"rules":[{"rule":"api","key":"alice"},{"rule":"ip","key":"1.2.3.4","cost":2}]})"));
  const auto denied =
      render(plan, result_of(outcome::over_limit, {make_decision(true, 100, 50, 60000ms, 0ms),
                                                   make_decision(false, 20, 1, 1900ms, 1200ms)}));
  EXPECT_EQ(denied.status, 429);
  auto body = body_of(denied);
  EXPECT_EQ(body["allowed"].as_bool(), false);
  EXPECT_EQ(body["retry_after_ms"].as_int64(), 1200);
  auto& results = body["results"].as_array();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].as_object().at("rule").as_string(), "api");
  EXPECT_EQ(results[0].as_object().at("key").as_string(), "alice");
  EXPECT_EQ(results[0].as_object().at("allowed").as_bool(), true)
      << "allowed alone; nothing consumed";
  EXPECT_EQ(results[1].as_object().at("allowed").as_bool(), false);
  EXPECT_EQ(results[1].as_object().at("remaining").as_int64(), 1);
  EXPECT_EQ(denied.header("RateLimit-Policy").value_or(""), R"("api";q=100;w=60, "ip";q=10;w=1)");
  EXPECT_EQ(denied.header("RateLimit").value_or(""), R"("api";r=50;t=60, "ip";r=1;t=2)");
  EXPECT_EQ(denied.header("Retry-After").value_or(""), "2");

  const auto allowed =
      render(plan, result_of(outcome::allowed, {make_decision(true, 100, 49, 60000ms, 0ms),
                                                make_decision(true, 20, 17, 300ms, 0ms)}));
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(body_of(allowed)["retry_after_ms"].as_int64(), 0);
  EXPECT_FALSE(allowed.header("Retry-After"));
}

TEST(render, a_group_check_names_the_group) {
  const auto plan = routed_plan(post_check(R"({"group":"signup","key":"10.2.2.2"})"));
  const auto res =
      render(plan, result_of(outcome::over_limit, {make_decision(false, 3, 0, 400ms, 400ms),
                                                   make_decision(true, 20, 19, 100ms, 0ms)}));
  EXPECT_EQ(res.status, 429);
  auto body = body_of(res);
  EXPECT_EQ(body["group"].as_string(), "signup");
  EXPECT_EQ(body["results"].as_array().size(), 2u);
  EXPECT_EQ(res.header("Retry-After").value_or(""), "1");
  const auto rules_form = routed_plan(post_check(R"({"rules":[{"rule":"ip","key":"a"}]})"));
  EXPECT_FALSE(body_of(render(rules_form, result_of(outcome::allowed,
                                                    {make_decision(true, 20, 19, 100ms, 0ms)})))
                   .contains("group"));
}

TEST(render, multi_check_backend_error_fails_closed_if_any_rule_does) {
  const auto plan = routed_plan(
      post_check(R"({"rules":[{"rule":"api","key":"alice"},{"rule":"ip","key":"1.2.3.4"}]})"));
  const auto res = render(plan, result_of(outcome::backend_error,
                                          {make_decision(true, 100, 0, 0ms, 0ms),
                                           make_decision(false, 20, 0, 0ms, 0ms)},
                                          make_error_code(errc::timeout)));
  EXPECT_EQ(res.status, 503);

  const auto open_plan = routed_plan(
      post_check(R"({"rules":[{"rule":"api","key":"alice"},{"rule":"api","key":"bob"}]})"));
  const auto open = render(open_plan, result_of(outcome::backend_error,
                                                {make_decision(true, 100, 0, 0ms, 0ms),
                                                 make_decision(true, 100, 0, 0ms, 0ms)},
                                                make_error_code(errc::timeout)));
  EXPECT_EQ(open.status, 200);
  EXPECT_EQ(body_of(open)["degraded"].as_bool(), true);
  EXPECT_EQ(open.header("RateLimit-Policy").value_or(""), R"("api";q=100;w=60)")
      << "one policy listed once";
}

TEST(render, probes) {
  EXPECT_EQ(render_health().status, 200);
  EXPECT_EQ(render_ready(true, "memory").status, 200);
  const auto down = render_ready(false, "redis");
  EXPECT_EQ(down.status, 503);
  EXPECT_NE(down.body.find("redis"), std::string::npos);
  const auto m = render_metrics("x 1\n");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.body, "x 1\n");
  EXPECT_EQ(m.header("content-type").value_or("").substr(0, 10), "text/plain");
}

TEST(ratelimit_headers, seconds_round_up_and_windows_are_at_least_one_second) {
  EXPECT_EQ(ceil_seconds(0ms), 0);
  EXPECT_EQ(ceil_seconds(1ms), 1);
  EXPECT_EQ(ceil_seconds(1000ms), 1);
  EXPECT_EQ(ceil_seconds(1001ms), 2);
  EXPECT_GT(ceil_seconds(decision::never), 1'000'000'000'000);
  EXPECT_EQ(policy_member(policy("p", algorithm::fixed_window, 3, 500ms)), R"("p";q=3;w=1)");
  EXPECT_EQ(policy_member(policy("p", algorithm::fixed_window, 3, 1h)), R"("p";q=3;w=3600)");
}

// The two halves with a real (memory) limiter between them: a limit holds, then lifts.
TEST(handler, route_limiter_render_end_to_end_without_sockets) {
  limiter lim("memory://");
  auto rules = test_rules();
  const auto req = post_check(R"({"rule":"fast","key":")" +
                              std::to_string(reinterpret_cast<std::uintptr_t>(&lim)) + "\"}");
  int allowed = 0;
  int denied = 0;
  for (int i = 0; i < 5; ++i) {
    const auto plan = routed_plan(req, rules);
    const auto res = render(plan, lim.check_all(plan.check_items()));
    (res.status == 200 ? allowed : denied)++;
    if (res.status == 429) {
      EXPECT_TRUE(res.header("Retry-After"));
      EXPECT_LE(body_of(res)["retry_after_ms"].as_int64(), 500);
    }
  }
  // fixed_window: at most 3 per aligned window; a window boundary may fall inside the loop.
  EXPECT_GE(allowed, 3);
  EXPECT_EQ(allowed + denied, 5);
}

http_request post_refund(std::string body) {
  return {
      "POST", "/v1/refund", {{"Content-Type", "application/json"}}, std::move(body), "10.0.0.9"};
}

TEST(route, refund_takes_one_rule_key_and_a_cost_of_at_least_one) {
  const auto plan = routed_plan(post_refund(R"({"rule":"ip","key":"k"})"));
  EXPECT_EQ(plan.kind, check_plan::style::refund);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].cost, 1);
  EXPECT_EQ(routed_plan(post_refund(R"({"rule":"ip","key":"k","cost":20})")).items[0].cost, 20);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"rule":"ip","key":"k","cost":0})", "at least 1 for a refund"},
      {R"({"rule":"ip","key":"k","cost":21})", "exceeds the capacity"},
      {R"({"rule":"ip","key":"k","cost":-1})", "must not be negative"},
      {R"({"rule":"ip","key":"k","cost":1.5})", "must be an integer"},
      {R"({"rule":"nope","key":"k"})", "unknown rule"},
      {R"({"rule":"ip"})", "missing field 'key'"},
      {R"({"rule":"ip","key":"k","extra":1})", "unknown field"},
      {R"({"rules":[{"rule":"ip","key":"k"}]})", "too deep"},
      {R"([1])", "JSON object"},
      {R"({"rule":"ip",)", ""},
  };
  for (const auto& [body, why] : bad) {
    const auto res = routed_error(post_refund(body));
    EXPECT_EQ(res.status, 400) << body;
    EXPECT_NE(error_of(res).find(why), std::string::npos) << body << ": " << res.body;
    // A refund of 0 is refused (above): /v1/check's hint does not apply here.
    EXPECT_EQ(error_of(res).find("peeks"), std::string::npos) << body << ": " << res.body;
  }
  EXPECT_EQ(routed_error({"GET", "/v1/refund", {}, "", "10.0.0.9"}).status, 405);
}

TEST(handler, refund_end_to_end_gives_back_what_was_consumed) {
  limiter lim("memory://");
  auto rules = test_rules();
  const auto check = post_check(R"({"rule":"api","key":"refund-me","cost":100})");
  auto plan = routed_plan(check, rules);
  ASSERT_EQ(render(plan, lim.check_all(plan.check_items())).status, 200);
  ASSERT_EQ(render(plan, lim.check_all(plan.check_items())).status, 429);
  const auto refund =
      routed_plan(post_refund(R"({"rule":"api","key":"refund-me","cost":30})"), rules);
  const auto& item = refund.items.front();
  const auto res = render_refund(lim.refund(item.key, item.rule->policy, item.cost));
  ASSERT_EQ(res.status, 200) << res.body;
  auto body = body_of(res);
  EXPECT_EQ(body["outcome"].as_string(), "refunded");
  EXPECT_EQ(body["refunded"].as_int64(), 30);
  EXPECT_EQ(body["remaining"].as_int64(), 30);
  EXPECT_EQ(body["limit"].as_int64(), 100);
  check_result failed;
  failed.outcome = outcome::backend_error;
  failed.error = errc::timeout;
  EXPECT_EQ(render_refund(failed).status, 503);
  // A refund plan never renders as a check.
  EXPECT_EQ(render(refund, lim.check_all(refund.check_items())).status, 500);
}

// What a refund gave back, in the body and the metric: nothing for a key that consumed
// nothing, and a replay under its Idempotency-Key (the first refund's amount) apart.
TEST(handler, a_refund_says_what_it_gave_back) {
  const auto refund = routed_plan(post_refund(R"({"rule":"api","key":"k","cost":3})"));
  auto made = [](std::int64_t given, bool replayed) {
    check_result r;
    r.outcome = outcome::allowed;
    r.decision = {true, 100, 100, 0ms, 0ms};
    r.refunded = given;
    r.replayed = replayed;
    return r;
  };
  metrics m;
  for (const auto& [r, said] :
       {std::pair{made(0, false), "nothing_to_refund"}, std::pair{made(2, false), "refunded"},
        std::pair{made(2, true), "replayed"}}) {
    const auto res = render_refund(r);
    EXPECT_EQ(res.status, 200);
    auto body = body_of(res);
    EXPECT_EQ(body["outcome"].as_string(), said) << res.body;
    EXPECT_EQ(body["refunded"].as_int64(), r.refunded) << res.body;
    observe_refund(m, refund, r);
  }
  const auto text = m.render();
  for (const char* line : {R"(floodgate_refunds_total{rule="api",result="refunded"} 1)",
                           R"(floodgate_refunds_total{rule="api",result="nothing_to_refund"} 1)",
                           R"(floodgate_refunds_total{rule="api",result="replayed"} 1)",
                           R"(floodgate_cost_refunded_total{rule="api"} 2)"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
}

// Issue 28, item 7: a refund whose call timed out (or lost its connection, or got a reply we
// could not read) may have been made in full; the answer said "nothing was refunded" and
// counted it as failed. It is "outcome unknown" now, in the body and the metric; only what
// Redis refused with an error reply (BUSY, OOM, an error) is known to have given nothing back.
TEST(handler, a_refund_that_timed_out_is_outcome_unknown_not_nothing_refunded) {
  const auto refund = routed_plan(post_refund(R"({"rule":"api","key":"k","cost":3})"));
  auto failed_with = [](errc e) {
    check_result r;
    r.outcome = outcome::backend_error;
    r.error = e;
    return r;
  };
  for (const errc e : {errc::timeout, errc::not_connected, errc::protocol_error}) {
    const auto res = render_refund(failed_with(e));
    EXPECT_EQ(res.status, 503);
    auto body = body_of(res);
    EXPECT_EQ(body["outcome"].as_string(), "unknown") << res.body;
    EXPECT_EQ(res.body.find("nothing was refunded"), std::string::npos) << res.body;
    metrics m;
    observe_refund(m, refund, failed_with(e));
    EXPECT_NE(m.render().find(R"(floodgate_refunds_total{rule="api",result="unknown"} 1)"),
              std::string::npos)
        << m.render();
  }
  for (const errc e : {errc::server_busy, errc::out_of_memory, errc::server_error}) {
    const auto res = render_refund(failed_with(e));
    EXPECT_EQ(res.status, 503);
    auto body = body_of(res);
    EXPECT_EQ(body["outcome"].as_string(), "not_refunded") << res.body;
    EXPECT_NE(res.body.find("nothing was refunded"), std::string::npos) << res.body;
    metrics m;
    observe_refund(m, refund, failed_with(e));
    EXPECT_NE(m.render().find(R"(floodgate_refunds_total{rule="api",result="failed"} 1)"),
              std::string::npos);
  }
}

http_request post(std::string path, std::string body) {
  return {
      "POST", std::move(path), {{"Content-Type", "application/json"}}, std::move(body), "10.0.0.9"};
}

TEST(route, acquire_and_release_take_a_concurrency_rule) {
  auto plan = routed_plan(post("/v1/acquire", R"({"rule":"exports","key":"u"})"));
  EXPECT_EQ(plan.kind, check_plan::style::acquire);
  plan = routed_plan(post("/v1/release", R"({"rule":"exports","key":"u","lease":"abc"})"));
  EXPECT_EQ(plan.kind, check_plan::style::release);
  EXPECT_EQ(plan.lease, "abc");
  EXPECT_EQ(routed_plan(post("/v1/renew", R"({"rule":"exports","key":"u","lease":"abc"})")).kind,
            check_plan::style::renew);
  const std::pair<std::string, const char*> bad[] = {
      {"/v1/acquire", R"({"rule":"api","key":"u"})"},                  // not a concurrency rule
      {"/v1/acquire", R"({"rule":"exports"})"},                        // no key
      {"/v1/acquire", R"({"rule":"exports","key":"u","lease":"x"})"},  // acquire takes no lease
      {"/v1/acquire", R"({"rule":"exports","key":"u","cost":2})"},
      {"/v1/release", R"({"rule":"exports","key":"u"})"},  // no lease
      {"/v1/release", R"({"rule":"exports","key":"u","lease":""})"},
      {"/v1/release", R"({"rule":"exports","key":"u","lease":7})"},
      {"/v1/release", R"({"rule":"nope","key":"u","lease":"a"})"},
      {"/v1/check", R"({"rule":"exports","key":"u"})"},  // /v1/check refuses it
      {"/v1/refund", R"({"rule":"exports","key":"u"})"},
  };
  for (const auto& [path, body] : bad)
    EXPECT_EQ(routed_error(post(path, body)).status, 400) << path << " " << body;
  EXPECT_EQ(routed_error(get_auth("exports")).status, 400);
  EXPECT_EQ(routed_error({"GET", "/v1/acquire", {}, "", "10.0.0.9"}).status, 405);
}

TEST(handler, acquire_release_end_to_end_without_sockets) {
  auto b = make_backend("memory://");
  semaphore sem{*b};
  const auto rules = test_rules();
  const auto plan = routed_plan(post("/v1/acquire", R"({"rule":"exports","key":"e2e"})"), rules);
  const auto& cp = *plan.items.front().rule->concurrency;
  const auto first = render_acquire(plan, sem.acquire("e2e", cp));
  ASSERT_EQ(first.status, 200) << first.body;
  const auto lease = std::string(body_of(first)["lease"].as_string());
  EXPECT_EQ(body_of(first)["lease_ms"].as_int64(), 30000);
  EXPECT_EQ(render_acquire(plan, sem.acquire("e2e", cp)).status, 200);
  const auto refused = render_acquire(plan, sem.acquire("e2e", cp));
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.header("Retry-After").value_or(""), "30");
  auto release = routed_plan(
      post("/v1/release", R"({"rule":"exports","key":"e2e","lease":")" + lease + "\"}"), rules);
  auto res = render_lease(release, sem.release("e2e", cp, release.lease));
  ASSERT_EQ(res.status, 200);
  EXPECT_TRUE(body_of(res)["released"].as_bool());
  res = render_lease(release, sem.release("e2e", cp, release.lease));
  EXPECT_FALSE(body_of(res)["released"].as_bool()) << "released twice";
  EXPECT_EQ(render_lease(release, {false, make_error_code(errc::timeout)}).status, 503);
}

}  // namespace
}  // namespace floodgate::service
