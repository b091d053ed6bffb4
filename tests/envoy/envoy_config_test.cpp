// envoyproxy/ratelimit's config format: what loads, what matches, and the errors (file, line,
// problem) for what must not load.
#include "envoy_config.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fifo_read.hpp"
#include "envoy_config_parse.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service::envoy {
namespace {

using config_text::error_of;
using config_text::parse;

const char* upstream_example = R"(
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    rate_limit:
      unit: second
      requests_per_unit: 100
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bar
        rate_limit:
          unit: minute
          requests_per_unit: 10
      - key: destination_cluster
        rate_limit:
          unit: hour
          requests_per_unit: 20
  - key: remote_address
    value: "10.*"
    rate_limit: {unit: day, requests_per_unit: 7}
)";

TEST(envoy_config, the_most_specific_rule_wins_and_only_at_the_last_entry) {
  const auto cfg = parse(upstream_example);
  const auto* users = cfg.find("mongo_cps", {{"database", "users"}});
  ASSERT_NE(users, nullptr);
  EXPECT_EQ(users->requests_per_unit, 500u);  // key and value before the key alone
  const auto* other = cfg.find("mongo_cps", {{"database", "orders"}});
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->requests_per_unit, 100u);
  EXPECT_NE(users->policy->name(), other->policy->name());

  const auto* bar =
      cfg.find("mongo_cps", {{"source_cluster", "proxy"}, {"destination_cluster", "bar"}});
  ASSERT_NE(bar, nullptr);
  EXPECT_EQ(bar->per, unit::minute);
  EXPECT_EQ(bar->metric_name, "source_cluster_proxy.destination_cluster_bar");
  const auto* any =
      cfg.find("mongo_cps", {{"source_cluster", "proxy"}, {"destination_cluster", "x"}});
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(any->per, unit::hour);
  EXPECT_EQ(any->metric_name, "source_cluster_proxy.destination_cluster");

  // A rule deeper than the request, or a request deeper than the rules: no limit.
  EXPECT_EQ(cfg.find("mongo_cps", {{"source_cluster", "proxy"}}), nullptr);
  EXPECT_EQ(cfg.find("mongo_cps", {{"database", "users"}, {"extra", "1"}}), nullptr);
  EXPECT_EQ(cfg.find("mongo_cps", {{"source_cluster", "other"}, {"destination_cluster", "bar"}}),
            nullptr);
  EXPECT_EQ(cfg.find("other_domain", {{"database", "users"}}), nullptr);

  // A value ending in '*' is a prefix.
  ASSERT_NE(cfg.find("mongo_cps", {{"remote_address", "10.1.2.3"}}), nullptr);
  EXPECT_EQ(cfg.find("mongo_cps", {{"remote_address", "11.1.2.3"}}), nullptr);
}

// Upstream stores a rule as "key_value" and a value ending in '*' as the prefix before it, so
// `value: "*"` is the prefix "key_": every value of the key, ahead of the key-only rule. An
// upstream config using it must not silently limit nothing here.
TEST(envoy_config, a_lone_star_value_matches_every_value_of_its_key) {
  const auto cfg = parse(R"(
domain: d
descriptors:
  - key: user
    value: "*"
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: user
    value: admin
    rate_limit: {unit: minute, requests_per_unit: 70}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
)");
  for (const char* value : {"alice", "*", ""}) {
    const auto* r = cfg.find("d", {{"user", value}});
    ASSERT_NE(r, nullptr) << value;
    EXPECT_EQ(r->requests_per_unit, 7u) << "'" << value << "'";
    EXPECT_EQ(r->metric_name, "user_*");
  }
  EXPECT_EQ(cfg.find("d", {{"user", "admin"}})->requests_per_unit, 70u) << "exact value first";
}

TEST(envoy_config, defaults_and_extensions) {
  const auto cfg = parse(R"(
domain: d
descriptors:
  - key: a
    rate_limit: {unit: MINUTE, requests_per_unit: 5}
  - key: b
    shadow_mode: true
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: gcra, failure_mode: open, name: bee}
  - key: c
    rate_limit: {unlimited: true, name: free, replaces: [{name: bee}]}
)");
  const auto* a = cfg.find("d", {{"a", "1"}});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->policy->algo(), algorithm::fixed_window);
  EXPECT_EQ(a->policy->on_failure(), failure_mode::closed);
  EXPECT_EQ(a->policy->window(), std::chrono::minutes(1));
  const auto* b = cfg.find("d", {{"b", "1"}});
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->shadow_mode);
  EXPECT_EQ(b->policy->algo(), algorithm::gcra);
  EXPECT_EQ(b->policy->on_failure(), failure_mode::open);
  const auto* c = cfg.find("d", {{"c", "1"}});
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->unlimited);
  EXPECT_FALSE(c->policy.has_value());
  EXPECT_EQ(c->replaces, std::vector<std::string>{"bee"});
  EXPECT_EQ(cfg.rule_count(), 3u);
}

TEST(envoy_config, units_are_upstreams) {
  EXPECT_EQ(window_of(unit::week), std::chrono::hours(24 * 7));
  EXPECT_EQ(window_of(unit::month), std::chrono::hours(24 * 30));
  EXPECT_EQ(window_of(unit::year), std::chrono::hours(24 * 365));
  EXPECT_EQ(parse_unit("Second"), unit::second);
  EXPECT_EQ(parse_unit("fortnight"), std::nullopt);
}

TEST(envoy_config, bad_files_name_file_line_and_problem) {
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    colour: red\n"),
            "edge.yaml:4: descriptor: unknown field 'colour' (expected key, value, rate_limit, "
            "descriptors, shadow_mode, detailed_metric, value_to_metric, share_threshold, "
            "metadata, quota_mode)");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n"
                     "      requests_per_unit: 1\n"),
            "edge.yaml:5: descriptor 'a': rate_limit: unit must be second, minute, hour, day, "
            "week, month or year (got 'fortnight')");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n"
                     "      unit: second\n"),
            "edge.yaml:6: descriptor 'a': rate_limit: 'unlimited: true' contradicts 'unit'");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n  - key: a\n"),
            "edge.yaml:4: descriptor 'a': duplicate descriptor (first at line 3)");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
                     "requests_per_unit: 4294967296}\n"),
            "edge.yaml:4: descriptor 'a': rate_limit: requests_per_unit must be an integer from 0 "
            "to 4294967295 (got '4294967296')");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second}\n"),
            "edge.yaml:4: descriptor 'a': rate_limit: missing field 'requests_per_unit'");
  EXPECT_EQ(error_of("descriptors: []\n"), "edge.yaml:1: missing field 'domain'");
  EXPECT_EQ(error_of("domain: d\nrules: []\n"),
            "edge.yaml:2: the file: unknown field 'rules' (expected domain, descriptors)");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - value: x\n"),
            "edge.yaml:3: descriptor: missing field 'key'");
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n"),
            "edge.yaml:4: 'shadow_mode' must be true or false (got 'maybe')");
  EXPECT_NE(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: year, "
                     "requests_per_unit: 4000000000}\n")
                .find("edge.yaml:4: descriptor 'a': rate_limit: "),
            std::string::npos);
}

// Upstream refuses a limit that replaces its own name; loaded, it would drop itself from every
// request it matches: a limit configured and silently never applied.
TEST(envoy_config, a_limit_that_replaces_itself_is_an_error) {
  EXPECT_EQ(error_of("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n"
                     "      requests_per_unit: 1\n      name: x\n      replaces:\n"
                     "        - name: y\n        - name: x\n"),
            "edge.yaml:10: descriptor 'a': rate_limit: 'replaces' names this limit itself ('x')");
}

TEST(envoy_config, a_domain_twice_is_an_error) {
  std::map<std::string, domain_config, std::less<>> domains;
  parse_envoy_domain("domain: d\n", "one.yaml", domains);
  try {
    parse_envoy_domain("domain: d\n", "two.yaml", domains);
    FAIL() << "loaded";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(), "two.yaml:1: duplicate domain 'd' (also in one.yaml)");
  }
}

TEST(envoy_config, the_example_directory_loads) {
  const auto cfg = load_envoy_config({FLOODGATE_SOURCE_DIR "/examples/ratelimit"});
  ASSERT_TRUE(cfg->has_domain("edge"));
  const auto* login = cfg->find("edge", {{"path", "/login"}});
  ASSERT_NE(login, nullptr);
  EXPECT_EQ(login->policy->algo(), algorithm::gcra);
  EXPECT_EQ(cfg->find("edge", {{"api_key", "partner-7"}})->requests_per_unit, 100000u);
}

// A careless --envoy-config (issue 28, item 4): a FIFO blocked open() until someone wrote to it
// (on SIGHUP: the thread that accepts connections). Refused as --config refuses it; in a
// directory, only regular files are read.
TEST(envoy_config, load_refuses_what_is_not_a_regular_file) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("floodgate-envoy-kind-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto fifo = (dir / "b.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(dir / "a.yaml") << "domain: a\n";
  EXPECT_EQ(test::outcome_of_reading_fifo(fifo, [fifo] { load_envoy_config({fifo}); }),
            fifo + ": not a regular file (a FIFO)");
  const auto cfg = load_envoy_config({dir.string()});
  EXPECT_TRUE(cfg->has_domain("a"));
  try {
    load_envoy_config({(dir / "missing.yaml").string()});
    ADD_FAILURE() << "loaded";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir / "missing.yaml").string() + ": cannot open: No such file or directory");
  }
  std::filesystem::remove_all(dir);
}

TEST(envoy_config, policy_names_are_stable_and_distinct) {
  const auto one = parse(upstream_example);
  const auto two = parse(upstream_example);
  EXPECT_EQ(one.find("mongo_cps", {{"database", "x"}})->policy->name(),
            two.find("mongo_cps", {{"database", "x"}})->policy->name());
}

}  // namespace
}  // namespace floodgate::service::envoy
