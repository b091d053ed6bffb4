// The floodgate command-line tool against a real Redis: check-config's messages are
// floodgated's, inspect does not consume, reset frees the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "child_process.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "inspect_helpers.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

TEST(cli, check_config_gives_floodgateds_messages) {
  temp_rules_file good("rules:\n  - {name: api, algorithm: gcra, limit: 5, window: 1s}\n");
  auto r = run_floodgate_cli({"check-config", good.path});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok (1 rules, 0 groups)"), std::string::npos) << r.output;

  temp_rules_file bad("rules:\n  - name: api\n    algorithm: sliding_log\n    limit: 0\n    window: 60s\n");
  r = run_floodgate_cli({"check-config", bad.path});
  EXPECT_EQ(r.exit_code, 1);
  const std::string message = bad.path + ":4: rule 'api': limit must be at least 1 (got 0)";
  EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  // floodgated says the same of the same file.
  const auto fg = run_floodgated({"--config", bad.path, "--listen", "127.0.0.1:0"});
  EXPECT_NE(fg.output.find(message), std::string::npos) << fg.output;

  // --cluster: a group's rules must share their key source.
  temp_rules_file mixed(
      "rules:\n  - {name: a, algorithm: gcra, limit: 5, window: 1s, key: remote_addr}\n"
      "  - {name: b, algorithm: gcra, limit: 5, window: 1s, key: 'header:X-User'}\n"
      "groups:\n  - {name: g, rules: [a, b]}\n");
  EXPECT_EQ(run_floodgate_cli({"check-config", mixed.path}).exit_code, 0);
  r = run_floodgate_cli({"check-config", mixed.path, "--cluster"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(":5: group 'g'"), std::string::npos) << r.output;

  EXPECT_EQ(run_floodgate_cli({"check-config"}).exit_code, 2);
  EXPECT_EQ(run_floodgate_cli({"frobnicate"}).exit_code, 2);
}

TEST(cli, inspect_does_not_consume_and_reset_frees_the_key) {
  redis_server redis;
  const std::string yaml =
      "rules:\n  - {name: api, algorithm: sliding_log, limit: 10, window: 1h}\n";
  temp_rules_file rules(yaml);
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url()};
  floodgated_process fg(yaml, o);
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline &&
       http_request_once(fg.port(), "GET", "/readyz").status != 200;)
    std::this_thread::sleep_for(10ms);
  http_connection c(fg.port());
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", R"({"rule":"api","key":"alice"})").status, 200);

  const std::vector<std::string> inspect = {"inspect", "--redis", redis.url(), "--rules",
                                            rules.path, "api", "alice"};
  for (int i = 0; i < 2; ++i) {  // twice: the first consumed nothing
    const auto r = run_floodgate_cli(inspect);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(cli_field(r.output, "remaining"), "7 of 10") << r.output;
    EXPECT_EQ(cli_field(r.output, "redis_key"), "floodgate:api:sl:{alice}") << r.output;
    EXPECT_TRUE(cli_field(r.output, "state").starts_with("zset ")) << r.output;
    // One member per millisecond with a count (docs/algorithms.md): 1 to 3 members for 3.
    EXPECT_FALSE(cli_field(r.output, "state_members").empty()) << r.output;
    const auto ttl = std::stoll(cli_field(r.output, "ttl_ms"));
    EXPECT_GT(ttl, 3'500'000);  // an hour's window, less this test's seconds
    EXPECT_LE(ttl, 3'600'000);
  }
  EXPECT_EQ(c.request("POST", "/v1/check", R"({"rule":"api","key":"alice"})").body.find(
                R"("remaining":6)") != std::string::npos,
            true);

  // A key never checked: no state, and the peek leaves none behind.
  for (int i = 0; i < 2; ++i) {
    const auto r = run_floodgate_cli({"inspect", "--redis", redis.url(), "--rules", rules.path, "api", "bob"});
    EXPECT_TRUE(cli_field(r.output, "state").starts_with("none")) << r.output;
    EXPECT_EQ(cli_field(r.output, "remaining"), "10 of 10") << r.output;
  }

  auto r = run_floodgate_cli({"reset", "--redis", redis.url(), "--rules", rules.path, "api", "alice"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(redis.command({"EXISTS", "floodgate:api:sl:{alice}"}).integer, 0);
  r = run_floodgate_cli(inspect);
  EXPECT_EQ(cli_field(r.output, "remaining"), "10 of 10") << r.output;
  EXPECT_NE(c.request("POST", "/v1/check", R"({"rule":"api","key":"alice"})").body.find(
                R"("remaining":9)"),
            std::string::npos);

  r = run_floodgate_cli({"inspect", "--redis", redis.url(), "--rules", rules.path, "nope", "alice"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no rule named 'nope'"), std::string::npos) << r.output;
  r = run_floodgate_cli({"inspect", "--redis", "redis://127.0.0.1:1", "--rules", rules.path, "api", "a"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(run_floodgate_cli({"inspect", "--rules", rules.path, "api", "a"}).exit_code, 2);
}

// A Redis that refuses the CLI says why in its own words, for reset as for inspect: not the
// library's "backend not connected".
TEST(cli, reset_and_inspect_quote_the_servers_refusal) {
  redis_server redis;
  redis.command({"CONFIG", "SET", "requirepass", "right"});
  temp_rules_file rules("rules:\n  - {name: api, algorithm: gcra, limit: 5, window: 1s}\n");
  const auto wrong = "redis://:wrong@127.0.0.1:" + std::to_string(redis.port());
  for (const char* command : {"reset", "inspect"}) {
    const auto r = run_floodgate_cli({command, "--redis", wrong, "--rules", rules.path, "api", "k"});
    EXPECT_EQ(r.exit_code, 1) << command << ": " << r.output;
    EXPECT_NE(r.output.find("WRONGPASS"), std::string::npos) << command << ": " << r.output;
  }
}

}  // namespace
}  // namespace floodgate::test
