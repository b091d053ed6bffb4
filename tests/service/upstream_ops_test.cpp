// What operators of envoyproxy/ratelimit use, served by floodgated: /healthcheck (upstream's
// answers: 200 "OK" when healthy, 500 when not) and JSON logs (--log-format json).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

const char* rules = "rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n";

TEST(upstream_ops, healthcheck_is_200_ok_when_ready) {
  floodgated_process fg(rules);
  const auto r = http_request_once(fg.port(), "GET", "/healthcheck");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "OK");
}

TEST(upstream_ops, healthcheck_is_500_while_the_backend_is_unreachable) {
  // Nothing listens there: the backend never becomes ready.
  floodgated_process fg(
      rules, {.extra_args = {"--redis", "redis://127.0.0.1:" + std::to_string(free_port()) +
                                            "?connect_timeout=200ms"}});
  const auto r = http_request_once(fg.port(), "GET", "/healthcheck");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(http_request_once(fg.port(), "GET", "/readyz").status, 503);
}

TEST(upstream_ops, json_logs_are_one_object_per_line_with_the_logfmt_fields) {
  // The first holds the port, so the second logs its rules and then fails to listen.
  floodgated_process first(rules);
  const auto dir = make_temp_dir("floodgate-json-logs-");
  const auto path = dir + "/rules.yaml";
  { std::ofstream(path) << rules; }
  const auto r = run_floodgated({"--config", path, "--log-format", "json", "--listen",
                                 "127.0.0.1:" + std::to_string(first.port())});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::istringstream lines(r.output);
  bool loaded = false, failed = false;
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    ++n;
    boost::system::error_code ec;
    const auto v = boost::json::parse(line, ec);
    ASSERT_FALSE(ec) << "not JSON: " << line;
    const auto& o = v.as_object();
    ASSERT_TRUE(o.contains("ts") && o.contains("level") && o.contains("msg")) << line;
    if (o.at("msg") == "config loaded") {
      loaded = true;
      EXPECT_EQ(o.at("rules").as_int64(), 1) << line;  // a number, as in the logfmt line
      EXPECT_EQ(o.at("level"), "info");
    }
    if (o.at("level") == "critical") failed = true;
  }
  EXPECT_GE(n, 2) << r.output;
  EXPECT_TRUE(loaded) << r.output;
  EXPECT_TRUE(failed) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(upstream_ops, log_format_takes_logfmt_or_json_only) {
  const auto r = run_floodgated({"--config", "/nonexistent.yaml", "--log-format", "xml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--log-format"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace floodgate::test
