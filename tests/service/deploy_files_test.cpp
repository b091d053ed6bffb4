// The deployment files in examples/ name metrics that a real floodgated exports: every metric
// in the Grafana dashboard's queries and in the Prometheus alert rules' expressions must be a
// sample on /metrics of floodgated on a real redis-server (--redis, so the sampler's families
// are there) after some traffic. A renamed metric fails here instead of leaving an empty
// panel or an alert that never fires. The dashboard's queries are also checked as PromQL by
// promtool (tests/deploy checks the alert rules with it).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <boost/json.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "metrics_text.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

const std::string source_dir = FLOODGATE_SOURCE_DIR;

std::string source_file(const std::string& path) {
  const auto text = read_file(source_dir + "/" + path);
  EXPECT_FALSE(text.empty()) << path;
  return text;
}

// Every "expr" in the dashboard, and the instance variable's query.
void dashboard_queries(const json::value& v, std::vector<std::string>& out) {
  if (const auto* o = v.if_object()) {
    for (const auto& [k, child] : *o) {
      if ((k == "expr" || k == "definition") && child.is_string())
        out.emplace_back(child.as_string());
      else
        dashboard_queries(child, out);
    }
  } else if (const auto* a = v.if_array()) {
    for (const auto& child : *a) dashboard_queries(child, out);
  }
}

std::vector<std::string> alert_exprs() {
  std::vector<std::string> out;
  const auto doc = YAML::LoadFile(source_dir + "/examples/prometheus/floodgate-alerts.yml");
  for (const auto& group : doc["groups"])
    for (const auto& rule : group["rules"]) out.push_back(rule["expr"].as<std::string>());
  return out;
}

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == ':';
}

// Every word starting with floodgate_ (no std::regex: GCC 12's, at -O1 under ASan, trips
// -Wmaybe-uninitialized inside libstdc++).
std::set<std::string> metric_names(const std::vector<std::string>& exprs) {
  std::set<std::string> out;
  for (const auto& e : exprs)
    for (auto at = e.find("floodgate_"); at != std::string::npos; at = e.find("floodgate_", at)) {
      auto end = at;
      while (end < e.size() && identifier_char(e[end])) ++end;
      if (at == 0 || !identifier_char(e[at - 1])) out.insert(e.substr(at, end - at));
      at = end;
    }
  return out;
}

void replace_all(std::string& s, std::string_view what, std::string_view with) {
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size()))
    s.replace(at, what.size(), with);
}

// The names of the samples in a Prometheus text exposition.
std::set<std::string> exported(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.insert(line.substr(0, line.find_first_of("{ ")));
  return out;
}

TEST(deploy_files, every_metric_in_the_dashboard_and_the_alerts_is_exported) {
  std::vector<std::string> dashboard;
  dashboard_queries(json::parse(source_file("examples/grafana/floodgate-dashboard.json")),
                    dashboard);
  const auto alerts = alert_exprs();
  const auto in_dashboard = metric_names(dashboard);
  const auto in_alerts = metric_names(alerts);
  // The extraction itself works: the dashboard has 20-odd panels' worth, the alerts 11 rules.
  ASSERT_GE(in_dashboard.size(), 25u);
  ASSERT_GE(in_alerts.size(), 10u);

  redis_server redis;
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url(), "--redis-sample-interval", "1s"};
  floodgated_process fg("rules:\n  - {name: api, algorithm: sliding_log, limit: 3, window: 1h}\n",
                        o);
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until &&
       http_request_once(fg.port(), "GET", "/readyz").status != 200;
       std::this_thread::sleep_for(20ms)) {
  }
  http_connection c(fg.port());
  for (int i = 0; i < 5; ++i) c.request("POST", "/v1/check", R"({"rule":"api","key":"k"})");
  // The sampler's families, all of them once a sample has seen the checks' script calls
  // (samples at start, then every second; 10 s allows a loaded machine).
  const std::string fcall =
      "floodgate_redis_script_calls_total{node=\"127.0.0.1:" + std::to_string(redis.port()) +
      "\",command=\"fcall\"}";
  std::string text;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(100ms)) {
    text = http_request_once(fg.port(), "GET", "/metrics").body;
    if (metric_value(text, fcall).value_or(0) >= 1) break;
  }
  ASSERT_GE(metric_value(text, fcall).value_or(0), 1) << text;
  const auto have = exported(text);
  for (const auto& n : in_dashboard)
    EXPECT_TRUE(have.contains(n)) << "the dashboard's " << n << " is not on /metrics";
  for (const auto& n : in_alerts)
    EXPECT_TRUE(have.contains(n)) << "the alert rules' " << n << " is not on /metrics";
}

// The alerts' readiness gauge says what /readyz says: 1 while Redis answers, 0 once it is
// gone (killed: connections refused, so readiness drops within the reconnect backoff; 10 s
// allows a loaded machine).
TEST(deploy_files, backend_ready_is_what_readyz_says) {
  redis_server redis;
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url()};
  floodgated_process fg("rules:\n  - {name: api, algorithm: gcra, limit: 3, window: 1s}\n", o);
  auto both = [&](int status, double ready) {
    for (auto until = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(50ms))
      if (http_request_once(fg.port(), "GET", "/readyz").status == status &&
          metric_value(http_request_once(fg.port(), "GET", "/metrics").body,
                       "floodgate_backend_ready") == ready)
        return true;
    return false;
  };
  EXPECT_TRUE(both(200, 1)) << fg.log();
  redis.kill();
  EXPECT_TRUE(both(503, 0)) << fg.log();
}

// promtool parses each dashboard query (Grafana's variables given values) as a recording rule.
TEST(deploy_files, the_dashboard_queries_are_promql) {
  std::vector<std::string> queries;
  dashboard_queries(json::parse(source_file("examples/grafana/floodgate-dashboard.json")), queries);
  YAML::Emitter rules;
  rules << YAML::BeginMap << YAML::Key << "groups" << YAML::Value << YAML::BeginSeq
        << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "dashboard" << YAML::Key
        << "rules" << YAML::Value << YAML::BeginSeq;
  int n = 0;
  for (auto q : queries) {
    if (q.starts_with("label_values(")) continue;  // a Grafana function, not PromQL
    replace_all(q, "$__rate_interval", "5m");
    replace_all(q, "$instance", ".*");
    ASSERT_EQ(q.find('$'), std::string::npos) << "a variable the test does not know: " << q;
    rules << YAML::BeginMap << YAML::Key << "record" << YAML::Value
          << "dashboard_query_" + std::to_string(++n) << YAML::Key << "expr" << YAML::Value << q
          << YAML::EndMap;
  }
  rules << YAML::EndSeq << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
  ASSERT_GE(n, 25);
  const auto dir = make_temp_dir("floodgate-dashboard-");
  const std::string path = dir + "/dashboard-rules.yml";
  std::ofstream(path) << rules.c_str() << "\n";
  child_process promtool({"promtool", "check", "rules", path}, {.output = dir + "/out.log"});
  const auto code = promtool.wait_exit(30s);
  const auto output = read_file(dir + "/out.log");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(code, 0) << output;
  EXPECT_NE(output.find("SUCCESS: " + std::to_string(n) + " rules found"), std::string::npos)
      << output;
}

}  // namespace
}  // namespace floodgate::test
