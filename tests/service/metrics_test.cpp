// Prometheus text: names, labels, cumulative buckets, and room for other collectors.
#include "metrics.hpp"

#include <gtest/gtest.h>

#include "floodgate/errors.hpp"

namespace floodgate::service {
namespace {

using namespace std::chrono_literals;

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

TEST(metrics, counts_decisions_by_rule_and_result) {
  metrics m;
  m.record_decision("api", verdict::allowed);
  m.record_decision("api", verdict::allowed);
  m.record_decision("api", verdict::denied);
  m.record_decision("ip", verdict::failed);
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
