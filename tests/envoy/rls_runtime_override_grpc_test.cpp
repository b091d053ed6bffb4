// Run-time overrides on Envoy's path: `floodgate override set envoy:DOMAIN:PATH VALUE` stored
// with the rules in a real redis-server, applied by floodgated --rules-from --envoy-config, and
// seen through a real gRPC call (the Node client, @grpc/grpc-js, as Envoy's wire format). A
// nested descriptor's rule is named by its whole path, so the same value under another rule is
// untouched; a name the Envoy config lacks is logged and not counted as live.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "real_clock_window.hpp"
#include "redis_server.hpp"
#include "rls_process.hpp"
// After rls_process.hpp: admin_port.hpp's wait_ready() hides rls_process.hpp's enum of that name.
#include "admin_port.hpp"
#include "inspect_helpers.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* nested_yaml = R"(
domain: edge
descriptors:
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
)";

// floodgated with its rules and overrides from Redis, the Envoy API and an admin listener.
struct envoy_fleet_member {
  explicit envoy_fleet_member(const redis_server& redis)
      : ref(redis.url() + "#prod"),
        rules(
            "rules:\n  - {name: api, algorithm: gcra, limit: 1, "
            "window: 1s}\n"),
        dir_(make_temp_dir("floodgate-rls-live-")) {
    const auto pushed = run_floodgate_cli({"rules", "push", rules.path, "--to", ref});
    if (pushed.exit_code != 0) throw std::runtime_error(pushed.output);
    write_file(dir_ + "/edge.yaml", nested_yaml);
    floodgated_process::options o;
    o.rules_file = false;
    o.extra_args = {"--rules-from",   ref,           "--redis",        redis.url() + "?timeout=2s",
                    "--grpc-listen",  "127.0.0.1:0", "--envoy-config", dir_ + "/edge.yaml",
                    "--admin-listen", "127.0.0.1:0"};
    fg = std::make_unique<floodgated_process>("", o);
    admin = admin_port_of(*fg);
    grpc = fg->grpc_port();
    wait_ready(*fg);  // connected to Redis before the first call
  }
  ~envoy_fleet_member() {
    fg.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(grpc); }
  const std::string& dir() const { return dir_; }
  long long live_overrides() const {
    const auto r = http_request_once(admin, "GET", "/v1/status");
    return json::parse(r.body)
        .as_object()
        .at("rules_source")
        .as_object()
        .at("runtime_overrides")
        .as_int64();
  }

  std::string ref;
  temp_rules_file rules;
  std::string dir_;
  std::unique_ptr<floodgated_process> fg;
  std::uint16_t admin = 0;
  std::uint16_t grpc = 0;
};

json::object nested_check(const char* tenant, const char* user) {
  json::array entries{json::object{{"key", "tenant"}, {"value", tenant}},
                      json::object{{"key", "user"}, {"value", user}}};
  return check(json::object{{"domain", "edge"},
                            {"descriptors", json::array{json::object{{"entries", entries}}}}});
}

std::string code_of(const json::array& results, std::size_t i) {
  return std::string(response(results, i).at("overall_code").as_string());
}

TEST(rls_runtime_overrides, a_set_on_a_nested_rule_decides_its_value_over_grpc) {
  redis_server redis;
  envoy_fleet_member m(redis);
  // One hour's window for the counts: the set, its application (1 s) and three client runs.
  inside_one_window(1h, 60s);

  const auto set = run_floodgate_cli(
      {"override", "set", m.ref, "envoy:edge:tenant,user", "vip", "--limit", "4", "--for", "1h"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_NE(set.output.find("set envoy:edge:tenant,user key 'vip' limit=4 for 1h0m0s"),
            std::string::npos)
      << set.output;
  ASSERT_TRUE(m.fg->wait_for_log("version=1 live=1", 10s)) << m.fg->log();
  EXPECT_EQ(m.live_overrides(), 1);

  json::array calls;
  for (int i = 0; i < 5; ++i) calls.push_back(nested_check("t1", "vip"));
  for (int i = 0; i < 3; ++i) calls.push_back(nested_check("t1", "bob"));
  for (int i = 0; i < 3; ++i) calls.push_back(check(request_of({{"user", "vip"}})));
  auto results = run_client(m, calls);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(code_of(results, i), "OK") << i;
  EXPECT_EQ(code_of(results, 4), "OVER_LIMIT") << "the override's 4";
  const auto& limit = response(results, 0).at("statuses").at(0).at("current_limit");
  EXPECT_EQ(limit.at("requests_per_unit"), 4);
  EXPECT_EQ(limit.at("unit"), "HOUR") << "the rule's unit";
  EXPECT_EQ(code_of(results, 5), "OK");
  EXPECT_EQ(code_of(results, 6), "OK");
  EXPECT_EQ(code_of(results, 7), "OVER_LIMIT") << "another value: the rule's 2";
  EXPECT_EQ(code_of(results, 8), "OK");
  EXPECT_EQ(code_of(results, 9), "OK");
  EXPECT_EQ(code_of(results, 10), "OVER_LIMIT") << "the same value under the top-level rule: 2";

  // A name this Envoy config lacks: stored (the CLI cannot see each instance's config), logged
  // by the instance, and not counted as live.
  const auto from = m.fg->log().size();
  const auto stray = run_floodgate_cli(
      {"override", "set", m.ref, "envoy:edge:nope", "x", "--limit", "4", "--for", "1h"});
  ASSERT_EQ(stray.exit_code, 0) << stray.output;
  ASSERT_TRUE(m.fg->wait_for_log("no rule named 'envoy:edge:nope'", 10s, from)) << m.fg->log();
  EXPECT_EQ(m.live_overrides(), 1);

  // Removed: the rule's 2 against the count of 4 the override left (the same fixed window).
  const auto removed =
      run_floodgate_cli({"override", "remove", m.ref, "envoy:edge:tenant,user", "vip"});
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  ASSERT_TRUE(m.fg->wait_for_log("version=3 live=0", 10s, from)) << m.fg->log();
  results = run_client(m, {nested_check("t1", "vip")});
  EXPECT_EQ(code_of(results, 0), "OVER_LIMIT");
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("current_limit").at("requests_per_unit"),
            2);
}

TEST(rls_runtime_overrides, the_cli_refuses_a_bad_envoy_rule_name_or_fields) {
  redis_server redis;
  const auto ref = redis.url() + "#prod";
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"envoy:edge", "v", "--limit", "3"}, "is not an Envoy rule name"},
           {{"envoy:edge:user", "v", "--limit", "3", "--window", "1m"}, "sets only --limit"},
           {{"envoy:edge:user", "v", "--limit", "0"}, "1 to 4294967295"}}) {
    std::vector<std::string> argv = {"override", "set", ref};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--for", "1h"});
    const auto r = run_floodgate_cli(argv);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace floodgate::test
