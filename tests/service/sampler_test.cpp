// The Redis sampler of a real floodgated (Redis's INFO and TIME on /metrics) on every kind of
// URL it samples beyond redis:// (admin_test.cpp): rediss:// (TLS, client certificates
// required), redis+sentinel:// through a failover, rediss+sentinel://; and its flags.
#include <gtest/gtest.h>

#include <thread>

#include "fault_relay.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "metrics_text.hpp"
#include "redis_sentinel.hpp"
#include "redis_server.hpp"
#include "tls_certificates.hpp"
#include "tls_redis.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

const std::string rules =
    "rules:\n  - {name: api, algorithm: sliding_log, limit: 20, window: 1h}\n";

floodgated_process start(const std::string& url, std::vector<std::string> more = {}) {
  floodgated_process::options o;
  o.extra_args = {"--redis", url, "--redis-sample-interval", "1s"};
  o.extra_args.insert(o.extra_args.end(), more.begin(), more.end());
  return floodgated_process(rules, o);
}

std::string node(std::uint16_t port) {
  return "node=\"127.0.0.1:" + std::to_string(port) + "\"";
}

// Polls /metrics until `series` has a value that `ok` accepts; the last text either way.
template <class Pred>
std::string wait_metric(const floodgated_process& fg, const std::string& series, Pred ok,
                        std::chrono::milliseconds within) {
  std::string text;
  for (auto until = std::chrono::steady_clock::now() + within;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(100ms)) {
    text = http_request_once(fg.port(), "GET", "/metrics").body;
    if (const auto v = metric_value(text, series); v && ok(*v)) break;
  }
  return text;
}

void check_some(const floodgated_process& fg, int n) {
  http_connection c(fg.port());
  for (int i = 0; i < n; ++i) c.request("POST", "/v1/check", R"({"rule":"api","key":"k"})");
}

// The node's INFO and TIME arrive (every 1 s here; 10 s allows a loaded machine), and the
// fcall count includes the checks just made through the same TLS Redis.
void expect_sampled(const floodgated_process& fg, std::uint16_t port) {
  const auto n = node(port);
  auto text = wait_metric(
      fg, "floodgate_redis_up{" + n + "}", [](double v) { return v == 1; }, 10s);
  ASSERT_EQ(metric_value(text, "floodgate_redis_up{" + n + "}"), 1) << text << fg.log();
  check_some(fg, 5);
  text = wait_metric(
      fg, "floodgate_redis_script_calls_total{" + n + R"(,command="fcall"})",
      [](double v) { return v >= 5; }, 10s);
  EXPECT_GE(metric_value(text, "floodgate_redis_script_calls_total{" + n + R"(,command="fcall"})")
                .value_or(-1),
            5)
      << text;
  EXPECT_GT(metric_value(text, "floodgate_redis_memory_used_bytes{" + n + "}").value_or(-1), 0);
  EXPECT_GE(metric_value(text, "floodgate_redis_clock_rtt_seconds{" + n + "}").value_or(-1), 0)
      << text;
}

TEST(sampler, samples_redis_over_tls) {
  tls_redis r;
  auto fg = start(r.url(r.certs.client_query()));
  expect_sampled(fg, r.tls_port);
}

// Without the client certificate the TLS handshake is refused: the node is down, not absent.
TEST(sampler, a_refused_tls_handshake_is_a_node_down) {
  tls_redis r;
  auto fg = start(r.url("tls_ca_file=" + r.certs.path("ca.crt")));
  const auto series = "floodgate_redis_up{" + node(r.tls_port) + "}";
  const auto text = wait_metric(
      fg, series, [](double) { return true; }, 10s);
  EXPECT_EQ(metric_value(text, series), 0) << text;
}

// The primary the sentinels name is sampled, and after a failover the new one is, under its
// own node label, the old one's series gone.
TEST(sampler, follows_the_sentinel_primary_through_a_failover) {
  redis_sentinel s;
  auto fg = start(s.url());
  expect_sampled(fg, s.node(0).port());

  const auto failover = s.failover();
  ASSERT_EQ(failover.kind, reply::status) << failover.str;
  ASSERT_TRUE(s.wait_primary_port(s.node(1).port(), 20s));
  const auto series = "floodgate_redis_up{" + node(s.node(1).port()) + "}";
  const auto text = wait_metric(
      fg, series, [](double v) { return v == 1; }, 15s);
  EXPECT_EQ(metric_value(text, series), 1) << text << fg.log();
  EXPECT_FALSE(metric_value(text, "floodgate_redis_up{" + node(s.node(0).port()) + "}")) << text;
}

TEST(sampler, samples_the_primary_of_a_tls_sentinel) {
  tls_certificates certs;
  redis_sentinel::options so;
  so.tls = &certs;
  redis_sentinel s{so};
  auto fg = start(s.tls_url(certs.client_query()));
  expect_sampled(fg, s.tls_port(0));
}

// One INFO per interval: over 4.5 s, 1 s gives 4 or 5, the default 5 s at most 1 (+1 for the
// count's own INFO each time it is read).
TEST(sampler, the_sample_interval_is_the_flags) {
  redis_server redis;
  auto info_calls = [&] {
    const auto r = redis.command({"INFO", "commandstats"});
    const auto at = r.str.find("cmdstat_info:calls=");
    return at == std::string::npos ? 0 : std::stoi(r.str.substr(at + 19));
  };
  {
    auto fg = start(redis.url());
    std::this_thread::sleep_for(500ms);  // its first sample
    const int before = info_calls();
    std::this_thread::sleep_for(4500ms);
    const int fast = info_calls() - before - 1;
    EXPECT_GE(fast, 3);
    EXPECT_LE(fast, 6);
  }
  floodgated_process::options o;
  o.extra_args = {"--redis", redis.url()};
  floodgated_process fg(rules, o);
  std::this_thread::sleep_for(500ms);
  const int before = info_calls();
  std::this_thread::sleep_for(4500ms);
  EXPECT_LE(info_calls() - before - 1, 1);
}

// A relay holding Redis's replies 40 ms makes Redis's clock look ~20 ms behind: the TIME
// reply left at the start of the round trip, not halfway (the estimate's ± rtt/2). Over a
// --max-clock-skew of 5 ms that is logged once, and its end once; under the default 100 ms,
// never.
TEST(sampler, a_skew_over_max_clock_skew_is_logged_once_and_its_end_too) {
  redis_server redis;
  fault_relay relay{redis.port()};
  relay.set_latency(40ms);
  auto fg = start(relay.url(), {"--max-clock-skew", "5ms"});
  auto usual = start(relay.url());
  const std::string over = "msg=\"clock skew with Redis over the threshold";
  ASSERT_TRUE(fg.wait_for_log(over, 10s)) << fg.log();
  EXPECT_NE(fg.log().find("threshold_ms=5"), std::string::npos) << fg.log();
  std::this_thread::sleep_for(2500ms);  // two more samples, still skewed: no more lines
  relay.set_latency(0ms);
  ASSERT_TRUE(fg.wait_for_log("msg=\"clock skew with Redis back under the threshold\"", 10s))
      << fg.log();
  const auto log = fg.log();
  EXPECT_EQ(log.find(over), log.rfind(over)) << log;
  EXPECT_EQ(usual.log().find(over), std::string::npos) << usual.log();
}

TEST(sampler, flags_are_in_help_and_bad_values_are_refused) {
  const auto help = run_floodgated({"--help"});
  EXPECT_NE(help.output.find("--redis-sample-interval DURATION"), std::string::npos);
  EXPECT_NE(help.output.find("--max-clock-skew DURATION"), std::string::npos);
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--redis-sample-interval", "500ms"},
                                                        {"--redis-sample-interval", "5"},
                                                        {"--redis-sample-interval", "2h"},
                                                        {"--max-clock-skew", "0ms"},
                                                        {"--max-clock-skew", "fast"}}) {
    const auto r = run_floodgated({"--config", "x.yaml", flag, value});
    EXPECT_EQ(r.exit_code, 2) << flag << " " << value;
    EXPECT_NE(r.output.find(flag + ": '" + value + "' is not a duration from"), std::string::npos)
        << r.output;
  }
  // Accepted: past the flags, the missing file is what stops it (1, not 2).
  EXPECT_EQ(run_floodgated({"--config", "/nonexistent.yaml", "--redis-sample-interval", "1s",
                            "--max-clock-skew", "250ms"})
                .exit_code,
            1);
}

}  // namespace
}  // namespace floodgate::test
