// For the raw-state inspection tests on every kind of Redis URL (inspect_test.cpp,
// inspect_cluster_test.cpp): the floodgate CLI run to its end, a rules file, and floodgated
// with an admin listener whose GET /v1/inspect is read as JSON.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "admin_port.hpp"
#include "child_process.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {

// sliding_log over an hour: the state is a zset with a TTL of at most the window, and nothing
// comes back while a test runs.
inline constexpr const char* inspect_rules =
    "rules:\n  - {name: api, algorithm: sliding_log, limit: 10, window: 1h}\n";

struct cli_result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

inline cli_result run_floodgate_cli(const std::vector<std::string>& args) {
  using namespace std::chrono_literals;
  char dir[] = "/tmp/floodgate-cli-XXXXXX";
  if (!::mkdtemp(dir)) throw std::runtime_error("mkdtemp failed");
  const std::string out = std::string(dir) + "/out.log";
  std::vector<std::string> argv = {FLOODGATE_CLI_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  child_process p(argv, {.output = out});
  cli_result r;
  // Each raw read asks at most a few dozen questions of 2 s each; the peek's client 2 s more.
  r.exit_code = p.wait_exit(60s).value_or(-1);
  r.output = read_file(out);
  std::filesystem::remove_all(dir);
  return r;
}

// A rules file in a temp dir, removed with it.
struct temp_rules_file {
  explicit temp_rules_file(const std::string& yaml) {
    char d[] = "/tmp/floodgate-cli-rules-XXXXXX";
    if (!::mkdtemp(d)) throw std::runtime_error("mkdtemp failed");
    dir = d;
    path = dir + "/rules.yaml";
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(yaml.c_str(), f);
    std::fclose(f);
  }
  ~temp_rules_file() { std::filesystem::remove_all(dir); }
  temp_rules_file(const temp_rules_file&) = delete;
  temp_rules_file& operator=(const temp_rules_file&) = delete;
  std::string dir, path;
};

// The value after `label` on its line of the CLI's output ("remaining      7 of 10" → "7 of 10").
inline std::string cli_field(const std::string& out, const std::string& label) {
  const auto at = out.starts_with(label + " ") ? 0 : out.find("\n" + label + " ");
  if (at == std::string::npos) return "";
  const auto start = at == 0 ? 0 : at + 1;
  auto line = out.substr(start + label.size(), out.find('\n', start) - start - label.size());
  return line.substr(line.find_first_not_of(' '));
}

// floodgated on `url` with inspect_rules and an admin listener, ready.
struct inspected_floodgated {
  explicit inspected_floodgated(const std::string& url)
      : fg(inspect_rules,
           [&] {
             floodgated_process::options o;
             o.extra_args = {"--redis", url, "--admin-listen", "127.0.0.1:0"};
             return o;
           }()),
        admin(admin_port_of(fg)) {
    wait_ready(fg);
  }
  // n checks of `key` against rule api, each allowed.
  void check(const std::string& key, int n) const {
    http_connection c(fg.port());
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(c.request("POST", "/v1/check", R"({"rule":"api","key":")" + key + R"("})").status,
                200)
          << key << " #" << i;
  }
  boost::json::object inspect(const std::string& key) const {
    const auto r = http_request_once(admin, "GET", "/v1/inspect?rule=api&key=" + key);
    EXPECT_EQ(r.status, 200) << r.body;
    return boost::json::parse(r.body).as_object();
  }

  floodgated_process fg;
  std::uint16_t admin;
};

// The admin answer for a key checked `checked` times (of 10, an hour's window) and read raw
// on `node`: the remaining count, a zset in Redis with a TTL of at most the window (less this
// test's seconds).
inline void expect_raw_state(const boost::json::object& o, const std::string& key, int checked,
                             const std::string& node) {
  EXPECT_EQ(o.at("remaining"), 10 - checked) << boost::json::serialize(o);
  ASSERT_TRUE(o.at("raw").is_object()) << boost::json::serialize(o);
  EXPECT_FALSE(o.contains("raw_note")) << boost::json::serialize(o);
  const auto& raw = o.at("raw").as_object();
  EXPECT_EQ(raw.at("node"), node.c_str()) << boost::json::serialize(o);
  EXPECT_EQ(raw.at("redis_key"), ("floodgate:api:sl:{" + key + "}").c_str());
  EXPECT_EQ(raw.at("type"), "zset");
  EXPECT_FALSE(raw.at("value").as_string().empty());
  EXPECT_GE(raw.at("members").as_int64(), 1);  // one per millisecond that admitted some
  EXPECT_LE(raw.at("members").as_int64(), checked);
  EXPECT_GT(raw.at("ttl_ms").as_int64(), 3'500'000);
  EXPECT_LE(raw.at("ttl_ms").as_int64(), 3'600'000);
}

// The CLI's inspect of the same on `url`: the same state, read on the same node.
inline void expect_cli_raw_state(const std::string& url, const std::string& key, int checked,
                                 const std::string& node) {
  temp_rules_file rules(inspect_rules);
  const auto r = run_floodgate_cli({"inspect", "--redis", url, "--rules", rules.path, "api", key});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_field(r.output, "remaining"), std::to_string(10 - checked) + " of 10") << r.output;
  EXPECT_EQ(cli_field(r.output, "redis_key"), "floodgate:api:sl:{" + key + "}") << r.output;
  EXPECT_EQ(cli_field(r.output, "redis_node"), node) << r.output;
  EXPECT_TRUE(cli_field(r.output, "state").starts_with("zset ")) << r.output;
  const auto ttl = cli_field(r.output, "ttl_ms");
  ASSERT_FALSE(ttl.empty()) << r.output;
  EXPECT_GT(std::stoll(ttl), 3'500'000) << r.output;
  EXPECT_LE(std::stoll(ttl), 3'600'000) << r.output;
}

inline std::string loopback(std::uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

}  // namespace floodgate::test
