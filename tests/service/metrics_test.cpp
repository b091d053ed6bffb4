// Prometheus text: names, labels, cumulative buckets, and room for other collectors.
#include "telemetry/metrics.hpp"

#include <gtest/gtest.h>

#include "admin/admin.hpp"
#include "floodgate/errors.hpp"
#include "redis_watch/redis_info.hpp"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

TEST(metrics, counts_decisions_by_rule_and_result) {
  metrics m;
  m.record_rule("api", verdict::allowed, 0, nullptr, false);
  m.record_rule("api", verdict::allowed, 0, nullptr, false);
  m.record_rule("api", verdict::denied, 0, nullptr, false);
  m.record_rule("ip", verdict::failed, 0, nullptr, false);
  const auto text = m.render();
  EXPECT_TRUE(has_line(text, "# TYPE floodgate_decisions_total counter")) << text;
  EXPECT_TRUE(has_line(text, R"(floodgate_decisions_total{rule="api",result="allowed"} 2)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_decisions_total{rule="api",result="denied"} 1)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_decisions_total{rule="api",result="degraded"} 0)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_decisions_total{rule="ip",result="failed"} 1)"));
}

TEST(metrics, backend_errors_by_kind_and_a_cumulative_latency_histogram) {
  metrics m;
  m.record_backend_call(50us, {});
  m.record_backend_call(2ms, make_error_code(errc::timeout));
  m.record_backend_call(3s, make_error_code(errc::not_connected));
  m.record_backend_call(1ms, std::make_error_code(std::errc::io_error));
  const auto text = m.render();
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_errors_total{kind="timeout"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_errors_total{kind="not_connected"} 1)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_errors_total{kind="other"} 1)"));
  EXPECT_TRUE(has_line(text, "# TYPE floodgate_backend_latency_seconds histogram"));
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_latency_seconds_bucket{le="0.0001"} 1)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_latency_seconds_bucket{le="0.001"} 2)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_latency_seconds_bucket{le="0.0025"} 3)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_latency_seconds_bucket{le="1"} 3)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_backend_latency_seconds_bucket{le="+Inf"} 4)"));
  EXPECT_TRUE(has_line(text, "floodgate_backend_latency_seconds_count 4"));
  EXPECT_TRUE(has_line(text, "floodgate_backend_latency_seconds_sum 3.00305"));
}

TEST(metrics, connections_reloads_responses_and_extra_collectors) {
  metrics m;
  m.connection_opened();
  m.connection_opened();
  m.connection_closed();
  m.record_reload(true);
  m.record_reload(false);
  m.record_reload(false);
  m.record_response(429);
  m.record_response(299);
  m.add_collector([](std::string& out) {
    out +=
        "# HELP floodgate_script_reloads_total Scripts reloaded after NOSCRIPT.\n"
        "# TYPE floodgate_script_reloads_total counter\nfloodgate_script_reloads_total 7\n";
  });
  const auto text = m.render();
  EXPECT_TRUE(has_line(text, "floodgate_open_connections 1")) << text;
  EXPECT_TRUE(has_line(text, R"(floodgate_config_reloads_total{result="success"} 1)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_config_reloads_total{result="failure"} 2)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_http_responses_total{code="429"} 1)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_http_responses_total{code="other"} 1)"));
  EXPECT_TRUE(has_line(text, "floodgate_script_reloads_total 7"));
}

TEST(metrics, verdict_of_a_check) {
  const decision yes{true, 1, 0, {}, {}};
  const decision no{false, 1, 0, {}, {}};
  EXPECT_EQ(verdict_of({outcome::allowed, {yes}, {}}), verdict::allowed);
  EXPECT_EQ(verdict_of({outcome::over_limit, {yes, no}, {}}), verdict::denied);
  EXPECT_EQ(verdict_of({outcome::backend_error, {yes}, make_error_code(errc::timeout)}),
            verdict::degraded);
  EXPECT_EQ(verdict_of({outcome::backend_error, {yes, no}, make_error_code(errc::timeout)}),
            verdict::failed);
  EXPECT_EQ(verdict_of({outcome::invalid_request, {}, make_error_code(errc::empty_key)}),
            verdict::invalid);
}

}  // namespace
}  // namespace floodgate::service

namespace floodgate::service {
namespace {

// The value of the sample `series` (name with labels, as rendered), or -1 when absent.
double value_of(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(metrics, per_rule_cost_near_limit_and_shadow_denials) {
  metrics m;
  // Capacity 20: "near" is remaining below 2 (remaining * 10 < 20).
  const decision left_5{true, 20, 5, {}, {}};
  const decision left_1{true, 20, 1, {}, {}};
  const decision left_0{true, 20, 0, {}, {}};
  const decision refused{false, 20, 0, {}, std::chrono::milliseconds(100)};
  m.record_rule("api", verdict::allowed, 3, &left_5, false);
  m.record_rule("api", verdict::allowed, 4, &left_1, false);
  m.record_rule("api", verdict::allowed, 1, &left_0, false);
  m.record_rule("api", verdict::denied, 2, &refused, false);        // charges nothing
  m.record_rule("api", verdict::degraded, 5, nullptr, false);       // fail-open: nothing charged
  m.record_rule("api", verdict::local_allowed, 2, nullptr, false);  // charged locally
  m.record_rule("new", verdict::denied, 1, &refused, true);
  const auto text = m.render();
  EXPECT_EQ(value_of(text, R"(floodgate_decisions_total{rule="api",result="allowed"})"), 3) << text;
  EXPECT_EQ(value_of(text, R"(floodgate_decisions_total{rule="api",result="denied"})"), 1);
  EXPECT_EQ(value_of(text, R"(floodgate_cost_consumed_total{rule="api"})"), 3 + 4 + 1 + 2);
  EXPECT_EQ(value_of(text, R"(floodgate_near_limit_total{rule="api"})"), 2);
  EXPECT_EQ(value_of(text, R"(floodgate_shadow_denied_total{rule="api"})"), 0);
  EXPECT_EQ(value_of(text, R"(floodgate_shadow_denied_total{rule="new"})"), 1);
  EXPECT_EQ(value_of(text, R"(floodgate_decisions_total{rule="new",result="denied"})"), 1);
  EXPECT_TRUE(has_line(text, "# TYPE floodgate_near_limit_total counter"));
}

TEST(metrics, lease_calls_by_operation_and_outcome_and_refunds_by_result) {
  metrics m;
  EXPECT_EQ(m.render().find("floodgate_lease_operations_total{"), std::string::npos)
      << "no series before a rule used leases";
  m.record_lease("jobs", lease_operation::acquire, lease_outcome::granted);
  m.record_lease("jobs", lease_operation::acquire, lease_outcome::granted);
  m.record_lease("jobs", lease_operation::acquire, lease_outcome::refused);
  m.record_lease("jobs", lease_operation::release, lease_outcome::not_held);
  m.record_lease("jobs", lease_operation::renew, lease_outcome::failed);
  m.record_refund("api", refund_result::refunded, 3);
  m.record_refund("api", refund_result::failed, 5);  // nothing given back: no cost
  const auto text = m.render();
  const std::string l = "floodgate_lease_operations_total{rule=\"jobs\",operation=";
  EXPECT_TRUE(has_line(text, "# TYPE floodgate_lease_operations_total counter")) << text;
  EXPECT_TRUE(has_line(text, l + R"("acquire",outcome="granted"} 2)"));
  EXPECT_TRUE(has_line(text, l + R"("acquire",outcome="refused"} 1)"));
  EXPECT_TRUE(has_line(text, l + R"("acquire",outcome="degraded"} 0)"));
  EXPECT_TRUE(has_line(text, l + R"("release",outcome="released"} 0)"));
  EXPECT_TRUE(has_line(text, l + R"("release",outcome="not_held"} 1)"));
  EXPECT_TRUE(has_line(text, l + R"("renew",outcome="failed"} 1)"));
  // Only the outcomes an operation can have: 5 for acquire, 4 each for release and renew.
  EXPECT_EQ(text.find(l + R"("release",outcome="granted"})"), std::string::npos);
  EXPECT_EQ(text.find(l + R"("acquire",outcome="not_held"})"), std::string::npos);
  std::size_t series = 0;
  for (auto at = text.find(l); at != std::string::npos; at = text.find(l, at + 1)) ++series;
  EXPECT_EQ(series, 13u);
  EXPECT_TRUE(has_line(text, R"(floodgate_refunds_total{rule="api",result="refunded"} 1)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_refunds_total{rule="api",result="failed"} 1)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_refunds_total{rule="api",result="invalid"} 0)"));
  EXPECT_TRUE(has_line(text, R"(floodgate_cost_refunded_total{rule="api"} 3)"));
  // Neither is a decision of the rule.
  EXPECT_EQ(text.find(R"(floodgate_decisions_total{rule="jobs")"), std::string::npos);
  EXPECT_EQ(text.find(R"(floodgate_decisions_total{rule="api")"), std::string::npos);
}

TEST(metrics, latency_by_algorithm_is_a_histogram_per_algorithm) {
  metrics m;
  m.record_algorithm_latency(algorithm::gcra, 200us);
  m.record_algorithm_latency(algorithm::gcra, 3ms);
  m.record_algorithm_latency(std::nullopt, 50us);
  const auto text = m.render();
  const std::string name = "floodgate_backend_latency_by_algorithm_seconds";
  EXPECT_TRUE(has_line(text, "# TYPE " + name + " histogram")) << text;
  EXPECT_EQ(value_of(text, name + R"(_bucket{algorithm="gcra",le="0.00025"})"), 1) << text;
  EXPECT_EQ(value_of(text, name + R"(_bucket{algorithm="gcra",le="0.005"})"), 2);
  EXPECT_EQ(value_of(text, name + R"(_bucket{algorithm="gcra",le="+Inf"})"), 2);
  EXPECT_EQ(value_of(text, name + R"(_count{algorithm="gcra"})"), 2);
  EXPECT_DOUBLE_EQ(value_of(text, name + R"(_sum{algorithm="gcra"})"), 0.0032);
  EXPECT_EQ(value_of(text, name + R"(_count{algorithm="mixed"})"), 1);
  EXPECT_EQ(value_of(text, name + R"(_count{algorithm="sliding_log"})"), 0);
  // The unlabelled histogram keeps its old form.
  EXPECT_TRUE(has_line(text, "floodgate_backend_latency_seconds_count 0"));
}

TEST(redis_info, parses_cpu_memory_keys_and_our_commands) {
  const std::string text =
      "# Server\r\nredis_version:7.0.15\r\n\r\n# Memory\r\nused_memory:1048576\r\n"
      "used_memory_human:1.00M\r\nmaxmemory:0\r\n\r\n# Stats\r\nexpired_keys:12\r\n"
      "evicted_keys:3\r\n\r\n# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500000\r\n"
      "used_cpu_sys_children:9.0\r\n\r\n# Commandstats\r\n"
      "cmdstat_evalsha:calls=42,usec=8400,usec_per_call=200.00,rejected_calls=0,failed_calls=1\r\n"
      "cmdstat_script|load:calls=5,usec=100,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n"
      "cmdstat_get:calls=7,usec=7,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n";
  const auto info = parse_info(text);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->used_memory, 1048576u);
  EXPECT_EQ(info->maxmemory, 0u);
  EXPECT_EQ(info->expired_keys, 12u);
  EXPECT_EQ(info->evicted_keys, 3u);
  EXPECT_DOUBLE_EQ(info->used_cpu_sys, 1.25);
  EXPECT_DOUBLE_EQ(info->used_cpu_user, 0.5);
  ASSERT_EQ(info->commands.size(), 2u);  // not GET: not one of ours
  EXPECT_EQ(info->commands[0].name, "evalsha");
  EXPECT_EQ(info->commands[0].calls, 42u);
  EXPECT_EQ(info->commands[0].usec, 8400u);
  EXPECT_EQ(info->commands[1].name, "script|load");
  EXPECT_FALSE(parse_info("-ERR unknown command\r\n"));
}

// The response of an admin request answered at once (all but /v1/inspect and /v1/reset).
http_response admin_answer(const http_request& req, const admin_sources& s) {
  return std::get<http_response>(route_admin(req, s));
}

TEST(admin, serves_metrics_and_probes_and_nothing_else) {
  metrics m;
  m.record_rule("api", verdict::denied, 0, nullptr, false);
  admin_sources s{&m, [] { return backend_state{false, "redis"}; }};
  http_request req{"GET", "/metrics", {}, {}, "127.0.0.1"};
  auto res = admin_answer(req, s);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(value_of(res.body, R"(floodgate_decisions_total{rule="api",result="denied"})"), 1);
  req.target = "/readyz";
  EXPECT_EQ(admin_answer(req, s).status, 503);
  req.target = "/healthz";
  EXPECT_EQ(admin_answer(req, s).status, 200);
  req.target = "/v1/check";
  EXPECT_EQ(admin_answer(req, s).status, 404);  // the admin listener decides nothing
  req.method = "POST";
  req.target = "/metrics";
  EXPECT_EQ(admin_answer(req, s).status, 405);
}

TEST(admin, query_parameters) {
  EXPECT_EQ(query_param("/v1/top?rule=api&n=5", "rule"), "api");
  EXPECT_EQ(query_param("/v1/top?rule=api&n=5", "n"), "5");
  EXPECT_EQ(query_param("/v1/top?rule=api&n", "n"), "");
  EXPECT_FALSE(query_param("/v1/top?rules=api", "rule"));
  EXPECT_FALSE(query_param("/v1/top", "rule"));
}

}  // namespace
}  // namespace floodgate::service

#include "redis_watch/clock_skew.hpp"

namespace floodgate::service {
namespace {

// Redis 300 ms ahead, a 10 ms round trip: the reply is taken to have left at the midpoint.
TEST(clock_skew, offset_from_the_midpoint_of_the_round_trip) {
  using namespace std::chrono;
  const system_clock::time_point sent{seconds(1'800'000'000)};
  const auto received = sent + 10ms;
  const auto redis = duration_cast<microseconds>(sent.time_since_epoch()) + 5ms + 300ms;
  const auto s = clock_offset(sent, redis, received);
  EXPECT_EQ(s.offset, 300ms);
  EXPECT_EQ(s.rtt, 10ms);
  EXPECT_TRUE(skewed(s, 100ms));
  EXPECT_FALSE(skewed(s, 300ms));
  const auto behind =
      clock_offset(sent, duration_cast<microseconds>(sent.time_since_epoch()), received);
  EXPECT_EQ(behind.offset, -5ms);
  EXPECT_FALSE(skewed(behind, 100ms));
}

}  // namespace
}  // namespace floodgate::service
