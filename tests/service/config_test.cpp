// The config file: every bad file names the file, the line and the problem.
#include "config/config.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "fifo_read.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;

// The message parse_config throws for `text` (as file "rules.yaml"); "" if it does not throw.
std::string error_for(const std::string& text) {
  try {
    parse_config(text, "rules.yaml");
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

constexpr const char* header = "rules:\n";

TEST(config, parses_every_field_and_applies_defaults) {
  const auto cfg = parse_config(R"(# comment
rules:
  - name: api
    algorithm: sliding_log
    limit: 100
    window: 60s
    failure_mode: open
    key: header:X-Api-Key
  - name: ip
    algorithm: gcra
    limit: 10
    window: 500ms
    burst: 20
  - name: hourly
    algorithm: token_bucket
    limit: 5
    window: 1h
)",
                                "rules.yaml");
  ASSERT_EQ(cfg.rules().size(), 3u);
  const rule* api = cfg.find("api");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->policy,
            policy("api", algorithm::sliding_log, 100, 60s, std::nullopt, failure_mode::open));
  EXPECT_EQ(api->key.from, key_source::kind::header);
  EXPECT_EQ(api->key.header, "X-Api-Key");
  EXPECT_EQ(api->key.describe(), "header:X-Api-Key");

  const rule* ip = cfg.find("ip");
  ASSERT_NE(ip, nullptr);
  EXPECT_EQ(ip->policy.burst(), 20);
  EXPECT_EQ(ip->policy.window(), 500ms);
  EXPECT_EQ(ip->policy.on_failure(), failure_mode::closed) << "fail closed unless told";
  EXPECT_EQ(ip->key.from, key_source::kind::remote_addr);
  EXPECT_EQ(ip->key.describe(), "remote_addr");

  EXPECT_EQ(cfg.find("hourly")->policy.burst(), 5) << "burst defaults to limit";
  EXPECT_EQ(cfg.find("hourly")->policy.window(), 3600s);
  EXPECT_EQ(cfg.find("nope"), nullptr);
}

TEST(config, block_for_is_a_duration_and_bad_ones_name_their_line) {
  const auto cfg = parse_config(
      "rules:\n  - {name: login, algorithm: sliding_log, limit: 5, window: 1m, block_for: 15m}\n"
      "  - {name: api, algorithm: gcra, limit: 5, window: 1m}\n",
      "rules.yaml");
  EXPECT_EQ(cfg.find("login")->policy.block_for(), 15min);
  EXPECT_EQ(cfg.find("api")->policy.block_for(), 0ms);
  EXPECT_NE(error_for(std::string(header) +
                      "  - name: a\n    algorithm: gcra\n    limit: 1\n    window: 1s\n"
                      "    block_for: soon\n")
                .find("rules.yaml:6: rule 'a': block_for must be a duration"),
            std::string::npos);
  EXPECT_NE(
      error_for(std::string(header) +
                "  - {name: a, algorithm: gcra, limit: 1, window: 1s, block_for: 5000000000h}\n")
          .find("block_for must be in 0..10^15 ms"),
      std::string::npos);
}

TEST(config, reserve_sets_reservations_and_bad_ones_name_their_line) {
  const auto cfg = parse_config(
      "rules:\n  - {name: hot, algorithm: fixed_window, limit: 1000, window: 1m, reserve: 50}\n"
      "  - {name: fast, algorithm: fixed_window, limit: 100, window: 200ms, reserve: 10}\n"
      "  - {name: set, algorithm: fixed_window, limit: 100, window: 1m, reserve: 10,"
      " reserve_for: 250ms}\n"
      "  - {name: api, algorithm: fixed_window, limit: 5, window: 1m}\n",
      "rules.yaml");
  EXPECT_EQ(cfg.find("hot")->policy.reserve(), 50);
  EXPECT_EQ(cfg.find("hot")->policy.reserve_for(), 1s) << "1 s unless told";
  EXPECT_EQ(cfg.find("fast")->policy.reserve_for(), 200ms) << "never past the window";
  EXPECT_EQ(cfg.find("set")->policy.reserve_for(), 250ms);
  EXPECT_EQ(cfg.find("api")->policy.reserve(), 0);
  const std::string r = "  - {name: r, algorithm: fixed_window, limit: 10, window: 1s";
  const std::pair<std::string, std::string> bad[] = {
      {r + ", reserve: 11}\n", "rules.yaml:2: rule 'r': reserve must be in 0..limit (10), got 11"},
      {r + ", reserve: 5, reserve_for: 2s}\n", "rules.yaml:2: rule 'r': reserve_for must be in"},
      {r + ", reserve_for: 1s}\n", "reserve_for applies only with reserve"},
      {"  - {name: r, algorithm: gcra, limit: 1000, window: 1s, burst: 50, reserve: 5}\n",
       "reserve needs a refill time burst x window / limit of at least 100 ms"},
      {"  - {name: r, algorithm: concurrency, limit: 2, lease: 1s, reserve: 1}\n",
       "reserve does not apply"},
  };
  for (const auto& [text, expected] : bad)
    EXPECT_NE(error_for(std::string(header) + text).find(expected), std::string::npos)
        << error_for(std::string(header) + text);
}

TEST(config, concurrency_rules_take_limit_and_lease_and_stay_out_of_groups) {
  const auto cfg = parse_config(
      "rules:\n  - {name: exports, algorithm: concurrency, limit: 20, lease: 30s}\n"
      "  - {name: jobs, algorithm: concurrency, limit: 2, lease: 5m, failure_mode: open}\n",
      "rules.yaml");
  const rule* r = cfg.find("exports");
  ASSERT_TRUE(r && r->concurrency);
  EXPECT_EQ(r->concurrency->limit(), 20);
  EXPECT_EQ(r->concurrency->lease(), 30s);
  EXPECT_EQ(r->concurrency->on_failure(), failure_mode::closed);
  EXPECT_EQ(cfg.find("jobs")->concurrency->on_failure(), failure_mode::open);
  const std::string c = "  - {name: c, algorithm: concurrency, limit: 2, lease: 1s";
  const std::pair<std::string, std::string> bad[] = {
      {c + ", window: 1s}\n", "rules.yaml:2: rule 'c': window does not apply"},
      {c + ", block_for: 1s}\n", "block_for does not apply"},
      {"  - {name: c, algorithm: concurrency, limit: 2}\n", "missing field 'lease'"},
      {"  - {name: c, algorithm: concurrency, lease: 1s}\n", "missing field 'limit'"},
      {c + ", failure_mode: local}\n", "must be open or closed"},
      {"  - {name: c, algorithm: concurrency, limit: 0, lease: 1s}\n",
       "limit must be in 1..1000000"},
      {"  - {name: c, algorithm: concurrency, limit: 1, lease: soon}\n",
       "lease must be a duration"},
      {"  - {name: c, algorithm: gcra, limit: 1, window: 1s, lease: 1s}\n",
       "lease applies only to algorithm: concurrency"},
      {c + "}\ngroups:\n  - {name: g, rules: [c]}\n",
       "is a concurrency limit: it cannot be in a group"},
  };
  for (const auto& [text, why] : bad)
    EXPECT_NE(error_for(std::string(header) + text).find(why), std::string::npos)
        << text << " -> " << error_for(std::string(header) + text);
}

TEST(config, the_shipped_example_is_valid) {
  const auto cfg = load_config(FLOODGATE_SOURCE_DIR "/examples/rules.yaml");
  EXPECT_GE(cfg.rules().size(), 2u);
  EXPECT_NE(cfg.find("api"), nullptr);
  ASSERT_NE(cfg.find_group("login"), nullptr);
  // It trusts loopback, where the example nginx runs, and nothing else.
  EXPECT_TRUE(cfg.is_trusted_proxy(*parse_ip("127.0.0.1")));
  EXPECT_TRUE(cfg.is_trusted_proxy(*parse_ip("::1")));
  EXPECT_FALSE(cfg.is_trusted_proxy(*parse_ip("10.0.0.1")));
  // Its group shares one key source, so the same file runs on Redis Cluster too.
  EXPECT_EQ(load_config(FLOODGATE_SOURCE_DIR "/examples/rules.yaml", placement::one_key_per_group)
                .groups()
                .size(),
            1u);
}

TEST(config, bad_files_name_file_line_and_problem) {
  struct bad {
    std::string text;
    std::string message;  // the whole message, or a prefix ending in "..."
  };
  const std::string api = "  - name: api\n    algorithm: sliding_log\n";
  const std::vector<bad> cases = {
      // impossible values, reported by policy's constructor at the offending field's line
      {api + "    limit: 0\n    window: 60s\n",
       "rules.yaml:4: rule 'api': limit must be at least 1 (got 0)"},
      {api + "    limit: 10\n    window: 0s\n",
       "rules.yaml:5: rule 'api': window must be at least 1ms (got 0ms)"},
      {api + "    limit: 10\n    window: 1s\n    burst: 5\n",
       "rules.yaml:6: rule 'api': burst applies only to token_bucket and gcra, not sliding_log"},
      {"  - name: b\n    algorithm: gcra\n    limit: 10\n    window: 1s\n    burst: 0\n",
       "rules.yaml:6: rule 'b': burst must be at least 1 (got 0)"},
      {api + "    limit: 1000000000000\n    window: 1h\n",
       "rules.yaml:4: rule 'api': limit (and burst) x window in ms must be at most 10^15..."},
      {"  - name: bad/name\n    algorithm: gcra\n    limit: 1\n    window: 1s\n",
       "rules.yaml:2: rule 'bad/name': name may hold only letters, digits, '_', '-' and '.'"},
      // wrong types and unknown values
      {api + "    limit: lots\n    window: 60s\n",
       "rules.yaml:4: rule 'api': limit must be an integer (got 'lots')"},
      {api + "    limit: \"100\"\n    window: 60s\n",
       "rules.yaml:4: rule 'api': limit must be an integer (got '100')"},
      {api + "    limit: 1.5\n    window: 60s\n",
       "rules.yaml:4: rule 'api': limit must be an integer (got '1.5')"},
      {api + "    limit: [1]\n    window: 60s\n",
       "rules.yaml:4: rule 'api': limit must be an integer"},
      {api + "    limit: 10\n    window: 60\n",
       "rules.yaml:5: rule 'api': window must be a duration such as 500ms, 60s, 5m or 1h (got "
       "'60')"},
      {api + "    limit: 10\n    window: 1.5s\n",
       "rules.yaml:5: rule 'api': window must be a duration..."},
      {api + "    limit: 10\n    window: -1s\n",
       "rules.yaml:5: rule 'api': window must be a duration..."},
      {api + "    limit: 10\n    window: 99999999999999999999h\n",
       "rules.yaml:5: rule 'api': window must be a duration..."},
      {"  - name: api\n    algorithm: leaky\n    limit: 1\n    window: 1s\n",
       "rules.yaml:3: rule 'api': algorithm must be one of sliding_log, sliding_window, "
       "fixed_window, token_bucket, gcra, concurrency (got 'leaky')"},
      {api + "    limit: 1\n    window: 1s\n    failure_mode: maybe\n",
       "rules.yaml:6: rule 'api': failure_mode must be open, closed or local (got 'maybe')"},
      {api + "    limit: 1\n    window: 1s\n    key: cookie:session\n",
       "rules.yaml:6: rule 'api': key must be remote_addr or header:NAME (got 'cookie:session')"},
      {api + "    limit: 1\n    window: 1s\n    key: \"header:\"\n",
       "rules.yaml:6: rule 'api': key must be remote_addr or header:NAME (got 'header:')"},
      {api + "    limit: 1\n    window: 1s\n    key: \"header:X Key\"\n",
       "rules.yaml:6: rule 'api': 'X Key' is not a valid header name"},
      {api + "    limit: 1\n    window: 1s\n    name2: x\n",
       "rules.yaml:6: rule 'api': unknown field 'name2'"},
      {api + "    limit: 1\n    limit: 2\n    window: 1s\n",
       "rules.yaml:5: rule 'api': duplicate field 'limit'"},
      {"  - name: [a]\n    algorithm: gcra\n    limit: 1\n    window: 1s\n",
       "rules.yaml:2: rule #1: name must be a string"},
      // missing fields
      {"  - algorithm: gcra\n    limit: 1\n    window: 1s\n",
       "rules.yaml:2: rule #1: missing field 'name'"},
      {api + "    window: 1s\n", "rules.yaml:2: rule 'api': missing field 'limit'"},
      {"  - name: api\n    limit: 1\n    window: 1s\n",
       "rules.yaml:2: rule 'api': missing field 'algorithm'"},
      // duplicates across rules
      {api + "    limit: 1\n    window: 1s\n" + api + "    limit: 2\n    window: 1s\n",
       "rules.yaml:6: rule 'api': duplicate name (first defined at line 2)"},
      {"  - just a string\n", "rules.yaml:2: rule #1 must be a map"},
  };
  for (const auto& c : cases) {
    const auto got = error_for(header + c.text);
    if (c.message.ends_with("...")) {
      const auto prefix = c.message.substr(0, c.message.size() - 3);
      EXPECT_EQ(got.substr(0, prefix.size()), prefix) << c.text;
    } else {
      EXPECT_EQ(got, c.message) << c.text;
    }
  }
}

TEST(config, bad_documents) {
  EXPECT_EQ(error_for(""), "rules.yaml:1: the file is empty; expected 'rules:'");
  EXPECT_EQ(error_for("# only a comment\n"), "rules.yaml:1: the file is empty; expected 'rules:'");
  EXPECT_EQ(error_for("- a\n- b\n"), "rules.yaml:1: expected a map with 'rules:' at the top level");
  EXPECT_EQ(error_for("limits: []\n"),
            "rules.yaml:1: unknown top-level field 'limits' (expected rules, groups, "
            "trusted_proxies)");
  EXPECT_EQ(error_for("rules: 5\n"), "rules.yaml:1: 'rules' must be a list of rules");
  EXPECT_EQ(error_for("rules: []\n"), "rules.yaml:1: 'rules' must hold at least one rule");
  EXPECT_EQ(error_for("rules:\n  - name: a\n  bad: [\n").substr(0, 26),
            "rules.yaml:3: invalid YAML");
  EXPECT_EQ(error_for("rules:\n\t- name: a\n").substr(0, 26), "rules.yaml:2: invalid YAML");
  // yaml-cpp's depth guard says "bad file", which points at the path rather than the nesting.
  const auto deep = error_for("rules: " + std::string(600, '[') + std::string(600, ']') + "\n");
  EXPECT_EQ(deep.substr(0, 64), "rules.yaml:1: invalid YAML: nested deeper than the parser allows")
      << deep;
}

TEST(config, trusted_proxies_is_a_list_of_addresses_and_ranges) {
  const std::string rules = "rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n";
  EXPECT_TRUE(parse_config(rules, "rules.yaml").trusted_proxies().empty()) << "default: nobody";
  const auto cfg = parse_config(rules + R"(trusted_proxies:
  - 127.0.0.1
  - "::1"
  - 10.0.0.0/8
  - fd00::/8
)",
                                "rules.yaml");
  ASSERT_EQ(cfg.trusted_proxies().size(), 4u);
  EXPECT_EQ(cfg.trusted_proxies()[2].to_string(), "10.0.0.0/8");
  EXPECT_TRUE(cfg.is_trusted_proxy(*parse_ip("10.9.8.7")));
  EXPECT_TRUE(cfg.is_trusted_proxy(*parse_ip("fd12::1")));
  EXPECT_TRUE(cfg.is_trusted_proxy(*parse_ip("::ffff:127.0.0.1")));
  EXPECT_FALSE(cfg.is_trusted_proxy(*parse_ip("127.0.0.2")));
  EXPECT_FALSE(cfg.is_trusted_proxy(*parse_ip("fe80::1")));
  // Flow style, unquoted IPv6 included.
  EXPECT_EQ(parse_config(rules + "trusted_proxies: [127.0.0.1, ::1]\n", "rules.yaml")
                .trusted_proxies()
                .size(),
            2u);
  EXPECT_TRUE(
      parse_config(rules + "trusted_proxies: []\n", "rules.yaml").trusted_proxies().empty());

  const auto error = [&](const std::string& tail) { return error_for(rules + tail); };
  EXPECT_EQ(error("trusted_proxies: 127.0.0.1\n"),
            "rules.yaml:3: 'trusted_proxies' must be a list of addresses or CIDR ranges");
  EXPECT_EQ(error("trusted_proxies:\n  - 127.0.0.1\n  - localhost\n"),
            "rules.yaml:5: trusted_proxies: 'localhost' is not an IPv4 or IPv6 address or CIDR "
            "range (e.g. 127.0.0.1, ::1, 10.0.0.0/8, fd00::/8; no bits set past the prefix)");
  EXPECT_EQ(error("trusted_proxies: [10.0.0.1/8]\n").substr(0, 50),
            "rules.yaml:3: trusted_proxies: '10.0.0.1/8' is not");
  EXPECT_EQ(error("trusted_proxies:\n  - [1]\n"),
            "rules.yaml:4: trusted_proxies: each entry must be an address or a CIDR range");
  EXPECT_EQ(error("trusted_proxies: []\ntrusted_proxies: []\n"),
            "rules.yaml:4: duplicate field 'trusted_proxies'");
}

// Rules for the group tests: two keyed on X-User-Id (one spelled in lower case), one on the
// client address.
constexpr const char* group_rules = R"(rules:
  - {name: minute, algorithm: sliding_log, limit: 5, window: 1m, key: header:X-User-Id}
  - {name: day, algorithm: fixed_window, limit: 100, window: 24h, key: header:x-user-id}
  - {name: ip, algorithm: gcra, limit: 10, window: 1s}
)";

std::string group_error(const std::string& groups, placement where = placement::any) {
  try {
    parse_config(group_rules + groups, "rules.yaml", where);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

TEST(config, groups_name_rules_checked_together) {
  const auto cfg = parse_config(group_rules + std::string(R"(groups:
  - name: user
    rules: [day, minute]
  - {name: everything, rules: [minute, day, ip]}
)"),
                                "rules.yaml");
  ASSERT_EQ(cfg.groups().size(), 2u);
  const group* user = cfg.find_group("user");
  ASSERT_NE(user, nullptr);
  const auto members = cfg.rules_of(*user);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0]->name(), "day") << "in the order the group lists them";
  EXPECT_EQ(members[1]->name(), "minute");
  EXPECT_EQ(cfg.rules_of(*cfg.find_group("everything")).size(), 3u);
  EXPECT_EQ(cfg.find_group("minute"), nullptr) << "a rule is not a group";
  EXPECT_EQ(cfg.find("user"), nullptr) << "a group is not a rule";
  EXPECT_TRUE(parse_config(group_rules, "rules.yaml").groups().empty()) << "groups are optional";
}

TEST(config, bad_groups_name_the_line_and_the_problem) {
  struct bad {
    std::string groups;
    std::string message;
  };
  const std::vector<bad> cases = {
      {"groups: {user: [minute]}\n", "rules.yaml:5: 'groups' must be a list of groups"},
      {"groups:\n  - user\n", "rules.yaml:6: group #1 must be a map"},
      {"groups:\n  - rules: [minute]\n", "rules.yaml:6: group #1: missing field 'name'"},
      {"groups:\n  - name: user\n", "rules.yaml:6: group 'user': missing field 'rules'"},
      {"groups:\n  - name: user\n    rules: []\n",
       "rules.yaml:7: group 'user': rules must be a non-empty list of rule names"},
      {"groups:\n  - name: user\n    rules: minute\n",
       "rules.yaml:7: group 'user': rules must be a non-empty list of rule names"},
      {"groups:\n  - name: user\n    rules:\n      - minute\n      - hour\n",
       "rules.yaml:9: group 'user': no rule named 'hour'"},
      {"groups:\n  - name: user\n    rules: [minute, day, minute]\n",
       "rules.yaml:7: group 'user': rule 'minute' is listed twice"},
      {"groups:\n  - name: user\n    rules: [[minute]]\n",
       "rules.yaml:7: group 'user': each of its rules must be a string"},
      {"groups:\n  - name: user\n    rules: [minute]\n    limit: 5\n",
       "rules.yaml:8: group 'user': unknown field 'limit' (expected name, rules)"},
      {"groups:\n  - name: a b\n    rules: [minute]\n",
       "rules.yaml:6: group 'a b': name must be 1 to 64 letters, digits, '_', '-' or '.'"},
      {"groups:\n  - name: ip\n    rules: [minute]\n",
       "rules.yaml:6: group 'ip': duplicate name (first defined at line 4)"},
      {"groups:\n  - {name: g, rules: [ip]}\n  - {name: g, rules: [day]}\n",
       "rules.yaml:7: group 'g': duplicate name (first defined at line 6)"},
      {"groups:\n  - name: big\n    rules: [" +
           [] {
             std::string list;
             for (int i = 0; i < 17; ++i) list += (i ? ", " : "") + std::string("ip");
             return list;
           }() +
           "]\n",
       "rules.yaml:7: group 'big': at most 16 rules (got 17)"},
  };
  for (const auto& c : cases) EXPECT_EQ(group_error(c.groups), c.message) << c.groups;
}

// On Redis Cluster the caller key is the hash tag: a group whose rules take different keys
// would need one script on several nodes. Rejected when the file is loaded.
TEST(config, on_cluster_a_group_must_share_one_key_source) {
  const std::string mixed = "groups:\n  - name: login\n    rules:\n      - minute\n      - ip\n";
  EXPECT_EQ(group_error(mixed, placement::one_key_per_group),
            "rules.yaml:9: group 'login': rules 'minute' (key header:X-User-Id) and 'ip' (key "
            "remote_addr) take different keys, so on Redis Cluster their counters live in "
            "different hash slots and cannot be decided in one atomic script; give every rule "
            "of the group the same key");
  EXPECT_EQ(group_error(mixed), "") << "one Redis (or memory) decides any keys in one script";
  EXPECT_EQ(group_error("groups:\n  - {name: user, rules: [minute, day]}\n",
                        placement::one_key_per_group),
            "")
      << "header names are case-insensitive: X-User-Id and x-user-id are one key";
}

TEST(config, load_config_names_the_path_as_given) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("floodgate-config-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "mine.yaml").string();
  {
    std::ofstream(path)
        << "rules:\n  - name: x\n    algorithm: gcra\n    limit: 0\n    window: 1s\n";
  }
  try {
    load_config(path);
    ADD_FAILURE() << "expected config_error";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ":4: rule 'x': limit must be at least 1 (got 0)");
  }
  std::filesystem::remove_all(dir);
  try {
    load_config(path);
    ADD_FAILURE() << "expected config_error";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot open: No such file or directory");
  }
}

// A careless --config: a directory read as an empty file said "the file is empty"; a FIFO
// blocked open() (and on SIGHUP the thread that accepts connections) until someone wrote to it.
TEST(config, load_config_refuses_what_is_not_a_regular_file) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("floodgate-config-kind-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  try {
    load_config(dir.string());
    ADD_FAILURE() << "expected config_error";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()), dir.string() + ": not a regular file (a directory)");
  }

  const auto fifo = (dir / "rules.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(test::outcome_of_reading_fifo(fifo, [fifo] { load_config(fifo); }),
            fifo + ": not a regular file (a FIFO)");
  std::filesystem::remove_all(dir);
}

TEST(config, load_config_applies_the_placement) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("floodgate-config-placement-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "rules.yaml").string();
  std::ofstream(path) << group_rules << "groups:\n  - {name: login, rules: [ip, day]}\n";
  EXPECT_EQ(load_config(path).groups().size(), 1u);
  try {
    load_config(path, placement::one_key_per_group);
    ADD_FAILURE() << "expected config_error";
  } catch (const config_error& e) {
    const std::string where = path + ":6: group 'login': ";
    EXPECT_EQ(std::string(e.what()).substr(0, where.size()), where);
  }
  std::filesystem::remove_all(dir);
}

// Rule lookup is the hot path's first step (/v1/check, /v1/auth): it must not depend on where
// the rule sits in the file. Before, find() walked the list, so with 100,000 rules the last one
// took ~100,000 name comparisons per request (the first: one). The margin is wide (a linear
// scan is thousands of times slower here), and the best of three runs keeps a busy machine's
// preemption out.
TEST(config, finding_a_rule_or_group_costs_the_same_wherever_it_is_in_the_file) {
  constexpr int n = 100'000;
  std::vector<rule> rules;
  rules.reserve(n);
  std::vector<group> groups;
  auto name_of = [](int i) {
    auto s = std::to_string(i);
    return "rule-" + std::string(6 - s.size(), '0') + s;  // one length: every compare is a memcmp
  };
  for (int i = 0; i < n; ++i) {
    rules.push_back({policy(name_of(i), algorithm::gcra, 1, 1s), {}});
    groups.push_back({"group-" + name_of(i), {static_cast<std::size_t>(i)}});
  }
  const config cfg(std::move(rules), std::move(groups));
  const auto first = name_of(0), last = name_of(n - 1);
  const auto first_group = "group-" + first, last_group = "group-" + last;
  ASSERT_EQ(cfg.find(last), &cfg.rules().back());
  ASSERT_EQ(cfg.find_group(last_group), &cfg.groups().back());

  // The best of three: the time of 2,000 lookups of `name`.
  auto time_of = [&](auto lookup) {
    auto best = std::chrono::steady_clock::duration::max();
    for (int run = 0; run < 3; ++run) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 2'000; ++i) lookup();
      best = std::min(best, std::chrono::steady_clock::now() - start);
    }
    return best;
  };
  const void* sink = nullptr;  // keeps the lookups from being optimized away
  const auto t_first = time_of([&] { sink = cfg.find(first); });
  const auto t_last = time_of([&] { sink = cfg.find(last); });
  const auto g_first = time_of([&] { sink = cfg.find_group(first_group); });
  const auto g_last = time_of([&] { sink = cfg.find_group(last_group); });
  EXPECT_NE(sink, nullptr);
  // 10x the first's time, plus 1 ms for a scheduler's hiccup on a loaded machine.
  EXPECT_LT(t_last, 10 * t_first + 1ms)
      << "first " << t_first.count() << " ns, last " << t_last.count() << " ns";
  EXPECT_LT(g_last, 10 * g_first + 1ms)
      << "first " << g_first.count() << " ns, last " << g_last.count() << " ns";
}

}  // namespace
}  // namespace floodgate::service
