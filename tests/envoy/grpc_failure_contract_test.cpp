// The failure contract of floodgated's Envoy API against a real redis-server (issue 24): a
// backend failure is a gRPC error (UNAVAILABLE) by default, so that Envoy's failure_mode_deny
// decides, as with envoyproxy/ratelimit; `--envoy-failure-mode rule` keeps each rule's
// failure_mode (rls_grpc.redis_down_follows_each_rules_failure_mode). gRPC health follows
// /readyz, answers upstream's service name `ratelimit` too, and goes NOT_SERVING when the drain
// begins. A call its client gave up on still charges, and is counted. Before: OVER_LIMIT or OK
// with Redis down, SERVING throughout an outage and a drain, `ratelimit` unknown.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "metrics_text.hpp"
#include "real_clock_window.hpp"
#include "redis_server.hpp"
#include "rls_process.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

constexpr int unavailable = 14, deadline_exceeded = 4, not_found = 5;

// The gRPC code of call `i` (0 for a response).
std::int64_t code_of(const json::array& results, std::size_t i) {
  const auto& r = results.at(i).as_array().at(0).as_object();
  return r.contains("ok") ? 0 : r.at("code").as_int64();
}

// Health of each name, in one client run: "SERVING", "NOT_SERVING", or the error code.
std::vector<std::string> health(const rls_process& p, std::vector<std::string> names) {
  json::array calls;
  for (const auto& n : names) calls.push_back(json::object{{"health", n}});
  const auto results = run_client(p, calls);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& r = results.at(i).as_array().at(0).as_object();
    out.push_back(r.contains("ok") ? std::string(r.at("ok").at("status").as_string())
                                   : std::to_string(r.at("code").as_int64()));
  }
  return out;
}

const std::vector<std::string> names = {"", "ratelimit",
                                        "envoy.service.ratelimit.v3.RateLimitService"};
const std::vector<std::string> all_serving(3, "SERVING"), none_serving(3, "NOT_SERVING");

// Waits (20 ms apart) until /readyz answers `status`.
bool readyz_becomes(rls_process& p, int status, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (http_request_once(p.fg().port(), "GET", "/readyz").status != status) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

double metric(rls_process& p, const std::string& series) {
  return metric_value(http_request_once(p.fg().port(), "GET", "/metrics").body, series)
      .value_or(-1);
}

TEST(grpc_failure_contract, a_paused_or_stopped_redis_fails_the_call_unavailable) {
  redis_server redis;
  rls_process p(redis.url() + "?timeout=300ms");
  const auto open = check(request_of({{"path", "/open"}}));  // failure_mode: open
  const auto closed = check(request_of({{"remote_address", "x"}}));
  ASSERT_EQ(code_of(run_client(p, {open}), 0), 0);
  // Scripts wait (PING does not): each call times out after 300 ms. Long enough for Node to
  // start and make both calls on a loaded machine; Redis is killed right after anyway.
  redis.command({"CLIENT", "PAUSE", "5000", "WRITE"});
  auto results = run_client(p, {open, closed});
  EXPECT_EQ(code_of(results, 0), unavailable) << json::serialize(results);
  EXPECT_EQ(code_of(results, 1), unavailable) << json::serialize(results);
  EXPECT_NE(json::serialize(results).find("the rate limit backend failed"), std::string::npos);
  redis.kill();
  results = run_client(p, {open, closed});
  EXPECT_EQ(code_of(results, 0), unavailable) << json::serialize(results);
  EXPECT_EQ(code_of(results, 1), unavailable) << json::serialize(results);
  EXPECT_GE(metric(p, "floodgate_envoy_requests_total{code=\"UNAVAILABLE\"}"), 4);
}

TEST(grpc_failure_contract, a_wrong_password_fails_the_call_unavailable_and_health_says_so) {
  redis_server redis;
  redis.command({"CONFIG", "SET", "requirepass", "secret"});
  rls_process p("redis://:wrong@127.0.0.1:" + std::to_string(redis.port()) + "?timeout=300ms", {},
                wait_ready::no);
  const auto results = run_client(p, {check(request_of({{"remote_address", "x"}}))});
  EXPECT_EQ(code_of(results, 0), unavailable) << json::serialize(results);
  EXPECT_EQ(http_request_once(p.fg().port(), "GET", "/readyz").status, 503);
  EXPECT_EQ(health(p, names), none_serving);
}

TEST(grpc_failure_contract, health_follows_readyz_through_an_outage) {
  redis_server redis;
  rls_process p(redis.url() + "?timeout=300ms");
  EXPECT_EQ(health(p, names), all_serving);
  EXPECT_EQ(health(p, {"no.such.Service"}).front(), std::to_string(not_found));
  redis.kill();
  ASSERT_TRUE(readyz_becomes(p, 503, 10s));
  EXPECT_EQ(health(p, names), none_serving);
  redis.restart();
  ASSERT_TRUE(readyz_becomes(p, 200, 10s)) << p.fg().log();
  EXPECT_EQ(health(p, names), all_serving);
}

// The drain is held open by an HTTP check waiting on a Redis paused for writes (its health,
// PING, still answers): health is SERVING before SIGTERM and NOT_SERVING right after, while
// HTTP still drains and the gRPC server still runs.
TEST(grpc_failure_contract, health_goes_not_serving_when_the_drain_begins) {
  redis_server redis;
  rls_process p(redis.url() + "?timeout=5s");
  // Longer than two Node runs (health before and after SIGTERM), within the call timeout.
  redis.command({"CLIENT", "PAUSE", "2500", "WRITE"});
  auto held = std::async(std::launch::async, [&p] {
    return http_request_once(p.fg().port(), "POST", "/v1/check",
                             R"({"rule":"unused","key":"drain","cost":1})");
  });
  EXPECT_EQ(health(p, names), all_serving);
  p.fg().signal(SIGTERM);
  ASSERT_TRUE(p.fg().wait_for_log("msg=\"draining\""));
  EXPECT_EQ(health(p, names), none_serving);
  EXPECT_EQ(held.get().status, 200) << "the check in flight was answered";
  EXPECT_EQ(p.fg().wait_exit(10s), 0);
}

// Once the client's warm-up call is answered, pauses Redis's writes for 1.5 s and writes the
// file `go` the client's next step waits for (await_file): the call after it is then held.
void pause_after_the_warm_up(rls_process& p, redis_server& redis, const std::string& go) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (metric(p, "floodgate_envoy_requests_total{code=\"OK\"}") < 1 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  redis.command({"CLIENT", "PAUSE", "1500", "WRITE"});
  std::ofstream(go) << "go";
}

// A gRPC call waiting on Redis when SIGTERM comes is answered before floodgated exits (the
// server sends GOAWAY, lets the calls in flight finish, then closes), and health said
// NOT_SERVING meanwhile. The call is held by a Redis paused for writes once Node has started.
TEST(grpc_failure_contract, a_call_in_flight_at_sigterm_is_answered_before_exit) {
  redis_server redis;
  rls_process p(redis.url() + "?timeout=5s");
  const auto go = p.dir() + "/paused";
  std::thread pauser([&] {
    pause_after_the_warm_up(p, redis, go);
    std::this_thread::sleep_for(300ms);  // the held call reaches floodgated and waits on Redis
    p.fg().signal(SIGTERM);
  });
  json::object wait;
  wait["await_file"] = go;
  wait["deadline_ms"] = 30'000;
  auto held = check(request_of({{"remote_address", "held"}}));
  held["deadline_ms"] = 10'000;
  const auto results =
      run_client(p, {check(request_of({{"remote_address", "warm-up"}})), wait, held});
  pauser.join();
  EXPECT_EQ(code_of(results, 2), 0) << json::serialize(results);
  EXPECT_EQ(response(results, 2).at("statuses").at(0).at("limit_remaining"), 29);
  EXPECT_TRUE(p.fg().wait_for_log("msg=\"draining\""));
  EXPECT_EQ(p.fg().wait_exit(10s), 0) << p.fg().log();
}

// A call its client gave up on is still being decided (Redis paused) when SIGTERM comes: its
// connection closes at once (nothing left to answer on it), and floodgated waits for the
// decision before its gRPC threads end, then exits 0. Before, the server was gone when Redis
// answered, and the answer's handler used its freed I/O context (caught by ASan).
TEST(grpc_failure_contract, a_decision_still_pending_at_exit_is_waited_for) {
  redis_server redis;
  rls_process p(redis.url() + "?timeout=5s");
  const auto go = p.dir() + "/paused";
  std::thread pauser([&] { pause_after_the_warm_up(p, redis, go); });
  json::object wait;
  wait["await_file"] = go;
  wait["deadline_ms"] = 30'000;
  auto gave_up = check(request_of({{"remote_address", "pending"}}));
  gave_up["deadline_ms"] = 100;
  const auto results =
      run_client(p, {check(request_of({{"remote_address", "warm-up"}})), wait, gave_up});
  pauser.join();
  EXPECT_EQ(code_of(results, 2), deadline_exceeded) << json::serialize(results);
  p.fg().signal(SIGTERM);  // Redis is still paused: the decision is pending
  EXPECT_EQ(p.fg().wait_exit(10s), 0) << p.fg().log();
}

// Envoy gives up after its filter timeout (20 ms by default) and, failing open, lets the
// request through: floodgated still charges it (as upstream), and counts the call CANCELLED.
TEST(grpc_failure_contract, a_call_its_client_gave_up_on_still_charges_and_is_counted) {
  redis_server redis;
  rls_process p(redis.url());
  // The charge is read back from the address's 30 a minute (a fixed window on the real clock)
  // after two client runs (node processes, up to 2 s each to start on a loaded machine), the
  // 1.2 s pause and a 5 s wait for the metric.
  inside_one_window(1min, 2 * 2s + 1200ms + 5s);
  // Redis is paused once Node has started (its first call answered: Node's start-up took
  // over a second on a loaded machine), and the client's call, with a 100 ms deadline, waits
  // on it; the pause (1.2 s) ends before floodgated's own deadlines would give the call up.
  const auto go = p.dir() + "/paused";
  std::thread pauser([&] {
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (metric(p, "floodgate_envoy_requests_total{code=\"OK\"}") < 1 &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(10ms);
    redis.command({"CLIENT", "PAUSE", "1200", "WRITE"});
    std::ofstream(go) << "go";
  });
  auto gave_up = check(request_of({{"remote_address", "c"}}));
  gave_up["deadline_ms"] = 100;
  json::object wait;
  wait["await_file"] = go;
  wait["deadline_ms"] = 30'000;
  const auto results =
      run_client(p, {check(request_of({{"remote_address", "warm-up"}})), wait, gave_up});
  pauser.join();
  EXPECT_EQ(code_of(results, 2), deadline_exceeded);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (metric(p, "floodgate_envoy_requests_total{code=\"CANCELLED\"}") < 1 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(metric(p, "floodgate_envoy_requests_total{code=\"CANCELLED\"}"), 1);
  auto peek = json::parse(R"({"domain":"edge","descriptors":[{"entries":[{"key":
      "remote_address","value":"c"}],"hits_addend":{"value":"0"}}]})")
                  .as_object();
  EXPECT_EQ(response(run_client(p, {check(peek)}), 0).at("statuses").at(0).at("limit_remaining"),
            29)
      << "charged";
}

}  // namespace
}  // namespace floodgate::test
