// The config file: every bad file names the file, the line and the problem.
#include "config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

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

TEST(config, the_shipped_example_is_valid) {
  const auto cfg = load_config(FLOODGATE_SOURCE_DIR "/examples/rules.yaml");
  EXPECT_GE(cfg.rules().size(), 2u);
  EXPECT_NE(cfg.find("api"), nullptr);
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
       "fixed_window, token_bucket, gcra (got 'leaky')"},
      {api + "    limit: 1\n    window: 1s\n    failure_mode: maybe\n",
       "rules.yaml:6: rule 'api': failure_mode must be open or closed (got 'maybe')"},
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
       "rules.yaml:6: rule 'api': duplicate rule name (first defined at line 2)"},
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
  EXPECT_EQ(error_for("limits: []\n"), "rules.yaml:1: unknown top-level field 'limits'");
  EXPECT_EQ(error_for("rules: 5\n"), "rules.yaml:1: 'rules' must be a list of rules");
  EXPECT_EQ(error_for("rules: []\n"), "rules.yaml:1: 'rules' must hold at least one rule");
  EXPECT_EQ(error_for("rules:\n  - name: a\n  bad: [\n").substr(0, 26),
            "rules.yaml:3: invalid YAML");
  EXPECT_EQ(error_for("rules:\n\t- name: a\n").substr(0, 26), "rules.yaml:2: invalid YAML");
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

}  // namespace
}  // namespace floodgate::service
