// Faults seen through floodgated: Redis (or the only sentinel) behind a fault relay that
// accepts connections and never answers. The answers take the failure mode (closed: 503
// naming the error), /metrics counts
// the errors by kind, the log names the cause in the client's words, and /readyz says not
// ready; when the relay forwards again, floodgated recovers by itself and says so.
#include <gtest/gtest.h>

#include <thread>

#include "fault_relay.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

// The value of one Prometheus sample line `name` (labels included), or -1 when absent.
long long metric(const std::string& metrics, const std::string& name) {
  const auto at = metrics.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(metrics.substr(at + name.size() + 2));
}

const std::string rules = R"(rules:
  - {name: api, algorithm: fixed_window, limit: 100, window: 1h, failure_mode: closed}
)";
const std::string body = R"({"rule":"api","key":"alice"})";

bool wait_status(std::uint16_t port, const std::string& path, int status,
                 std::chrono::milliseconds limit) {
  for (auto until = std::chrono::steady_clock::now() + limit;;) {
    if (http_request_once(port, "GET", path).status == status) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
}

// The log line for the cause: "backend failing" with `words` in its error="...".
bool logged_cause(const floodgated_process& fg, const std::string& words) {
  const auto log = fg.log();
  for (auto at = log.find("msg=\"backend failing\""); at != std::string::npos;
       at = log.find("msg=\"backend failing\"", at + 1)) {
    const auto line = log.substr(at, log.find('\n', at) - at);
    if (line.find(words) != std::string::npos) return true;
  }
  return false;
}

TEST(service_faults, redis_black_hole_is_counted_logged_and_recovered) {
  redis_server redis;
  fault_relay relay{redis.port()};
  relay.set_fault(fault_relay::fault::black_hole);
  floodgated_process::options opts;
  opts.extra_args = {"--redis", relay.url() + "?timeout=100ms&connect_timeout=300ms"};
  floodgated_process fg(rules, opts);
  http_connection c(fg.port());
  for (int i = 0; i < 5; ++i) {
    const auto r = c.request("POST", "/v1/check", body);
    EXPECT_EQ(r.status, 503) << r.body;  // the rule fails closed, and the answer says why
    EXPECT_NE(r.body.find("backend unavailable (backend"), std::string::npos) << r.body;
  }
  const auto metrics = http_request_once(fg.port(), "GET", "/metrics").body;
  const auto timeouts = metric(metrics, R"(floodgate_backend_errors_total{kind="timeout"})");
  const auto not_connected =
      metric(metrics, R"(floodgate_backend_errors_total{kind="not_connected"})");
  EXPECT_EQ(timeouts + not_connected, 5) << metrics;
  EXPECT_EQ(http_request_once(fg.port(), "GET", "/readyz").status, 503);
  // The connection's own words: the handshake never answered. The watcher polls once a second.
  EXPECT_TRUE(fg.wait_for_log("backend failing", 5s)) << fg.log();
  EXPECT_TRUE(logged_cause(fg, "within connect_timeout")) << fg.log();
  EXPECT_TRUE(fg.wait_for_log("backend error; rules apply their failure_mode", 5s)) << fg.log();

  relay.set_fault(fault_relay::fault::none);
  // Reconnect backoff is capped at 1 s (jittered ±50%), then a handshake: well within 10 s.
  EXPECT_TRUE(wait_status(fg.port(), "/readyz", 200, 10s)) << fg.log();
  EXPECT_EQ(c.request("POST", "/v1/check", body).status, 200);
  EXPECT_TRUE(fg.wait_for_log("backend answering again", 5s)) << fg.log();
}

// Five calls that got no answer open the breaker; when Redis answers again, /readyz must turn
// 200 with no traffic at all. A load balancer stops sending checks to an instance whose
// /readyz is 503, so if only a check could close the breaker (its half-open probe), an instance
// that lost Redis for a moment would stay out of the pool for ever.
TEST(service_faults, readyz_recovers_after_the_breaker_opened_with_no_traffic) {
  redis_server redis;
  fault_relay relay{redis.port()};
  floodgated_process::options opts;
  opts.extra_args = {"--redis", relay.url() + "?timeout=100ms"};
  floodgated_process fg(rules, opts);
  http_connection c(fg.port());
  ASSERT_EQ(c.request("POST", "/v1/check", body).status, 200);  // connected and answering
  for (int outage = 0; outage < 2; ++outage) {  // the second: the node probes every time
    relay.set_fault(fault_relay::fault::black_hole);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(c.request("POST", "/v1/check", body).status, 503);
    EXPECT_EQ(http_request_once(fg.port(), "GET", "/readyz").status, 503);
    relay.set_fault(fault_relay::fault::none);
    // The breaker stays open 500 ms (breaker_open_for); reconnecting is capped at 1 s of
    // backoff (jittered +-50%), then a handshake of one round trip: 10 s is far beyond both.
    EXPECT_TRUE(wait_status(fg.port(), "/readyz", 200, 10s)) << "outage " << outage << fg.log();
    EXPECT_EQ(c.request("POST", "/v1/check", body).status, 200);
  }
}

// The only sentinel accepts and never answers: no primary is ever named. Calls fail at once
// with not_connected (not at their deadline), and the log quotes the sentinel's silence.
TEST(service_faults, sentinel_black_hole_is_counted_and_logged) {
  redis_server redis;
  fault_relay hole{redis.port()};
  hole.set_fault(fault_relay::fault::black_hole);
  floodgated_process::options opts;
  opts.extra_args = {"--redis", "redis+sentinel://127.0.0.1:" + std::to_string(hole.port()) +
                                    "/fg?timeout=100ms&connect_timeout=300ms"};
  floodgated_process fg(rules, opts);
  http_connection c(fg.port());
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = c.request("POST", "/v1/check", body);
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_NE(r.body.find("backend not connected"), std::string::npos) << r.body;
    // No primary: failed at once, far below the 100 ms deadline (slack for a loaded machine).
    EXPECT_LT(std::chrono::steady_clock::now() - start, 80ms);
  }
  const auto metrics = http_request_once(fg.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric(metrics, R"(floodgate_backend_errors_total{kind="not_connected"})"), 5)
      << metrics;
  EXPECT_EQ(http_request_once(fg.port(), "GET", "/readyz").status, 503);
  for (auto until = std::chrono::steady_clock::now() + 5s;
       !logged_cause(fg, "within connect_timeout");) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << fg.log();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(logged_cause(fg, "backend=redis-sentinel")) << fg.log();
  EXPECT_TRUE(logged_cause(fg, "no primary known: 127.0.0.1:" + std::to_string(hole.port())))
      << fg.log();
}

}  // namespace
}  // namespace floodgate::test
