// floodgated's Envoy rate limit service over real gRPC: a Node client (@grpc/grpc-js,
// @grpc/proto-loader, loading service/envoy/proto at run time; no code shared with floodgate)
// against the real binary on a real redis-server. Wire round trip, exact limits under forked
// same-instant bursts with the other descriptors untouched, Redis down in both failure modes,
// bad requests, SIGHUP reload, health, start-up errors.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "real_clock_window.hpp"
#include "redis_server.hpp"
#include "rls_process.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

TEST(rls_grpc, envoys_wire_format_round_trips) {
  redis_server redis;
  rls_process p(redis.url(), {"--envoy-response-headers"});
  auto tenant = request_of({{"remote_address", "198.51.100.1"}, {"path", "/api"}});
  tenant["descriptors"].as_array().push_back(
      json::parse(R"({"entries":[{"key":"tenant","value":"t1"},{"key":"plan","value":"paid"}]})"));
  tenant["descriptors"].as_array().push_back(
      json::parse(R"({"entries":[{"key":"nothing","value":"x"}]})"));
  const auto results = run_client(p, {check(tenant)});
  const auto& r = response(results, 0);
  EXPECT_EQ(r.at("overall_code"), "OK");
  const auto& st = r.at("statuses").as_array();
  ASSERT_EQ(st.size(), 4u);
  const auto& first = st[0].as_object();
  EXPECT_EQ(first.at("code"), "OK");
  EXPECT_EQ(first.at("limit_remaining"), 29);
  EXPECT_EQ(first.at("current_limit").at("requests_per_unit"), 30);
  EXPECT_EQ(first.at("current_limit").at("unit"), "MINUTE");
  const auto secs =
      std::stoll(std::string(first.at("duration_until_reset").at("seconds").as_string()));
  EXPECT_GE(secs, 0);
  EXPECT_LE(secs, 60);
  EXPECT_EQ(st[1].at("current_limit").at("name"), "api");
  EXPECT_EQ(st[1].at("limit_remaining"), 999);
  EXPECT_TRUE(st[2].at("current_limit").is_null()) << "unlimited";
  EXPECT_EQ(st[2].at("limit_remaining"), 4294967295LL);
  EXPECT_TRUE(st[3].at("current_limit").is_null()) << "no rule";
  const auto& headers = r.at("response_headers_to_add").as_array();
  ASSERT_EQ(headers.size(), 3u);
  EXPECT_EQ(headers[0].at("key"), "RateLimit-Limit");
  EXPECT_EQ(headers[0].at("value"), "30");
  EXPECT_EQ(headers[1].at("key"), "RateLimit-Remaining");
  EXPECT_EQ(headers[1].at("value"), "29");
  EXPECT_EQ(headers[2].at("key"), "RateLimit-Reset");
}

// Envoy's limits are fixed windows aligned to the clock: a test whose calls must share one
// minute starts with half of one left (the burst and its check took 12 s once on a loaded
// machine, and a minute boundary between them reset /api to 1000). Each client run is a node
// process with no deadline of its own: half a minute is the most a test can ask for.
void start_early_in_a_minute() {
  inside_one_window(std::chrono::minutes(1), 30s);
}

// 4 processes × 25 calls at once for remote_address (30 a minute) AND /api (1000).
void burst_admits_exactly_the_limit(const std::string& backend_url) {
  rls_process p(backend_url);
  start_early_in_a_minute();
  const auto in = p.dir() + "/burst.json";
  write_file(in, json::serialize(json::array{check(
                     request_of({{"remote_address", "203.0.113.9"}, {"path", "/api"}}), 25)}));
  std::string cmd;
  for (int i = 0; i < 4; ++i)
    cmd += node_command(p.address(), in, p.dir() + "/burst" + std::to_string(i) + ".json",
                        p.dir() + "/burst" + std::to_string(i) + ".err") +
           " & ";
  cmd += "wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  int ok = 0, over = 0;
  for (int i = 0; i < 4; ++i) {
    const auto results = json::parse(read_file(p.dir() + "/burst" + std::to_string(i) + ".json"));
    for (const auto& copy : results.as_array().at(0).as_array()) {
      const auto& code = copy.at("ok").at("overall_code");
      (code == "OK" ? ok : over)++;
    }
  }
  EXPECT_EQ(ok, 30);
  EXPECT_EQ(over, 70);
  // /api was charged only by the 30 admitted requests: 970 left (hits_addend 0 only looks).
  auto peek = json::parse(R"({"domain":"edge","descriptors":[{"entries":[{"key":"path",
      "value":"/api"}],"hits_addend":{"value":"0"}}]})")
                  .as_object();
  const auto results = run_client(p, {check(peek)});
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 970);
}

TEST(rls_grpc, forked_same_instant_bursts_admit_exactly_the_limit_and_leave_the_rest_untouched) {
  redis_server redis;
  burst_admits_exactly_the_limit(redis.url());
}

TEST(rls_grpc, the_same_burst_on_the_memory_backend) {
  burst_admits_exactly_the_limit("");
}

// With --envoy-failure-mode rule (the default is upstream's: grpc_failure_contract_test.cpp).
TEST(rls_grpc, redis_down_follows_each_rules_failure_mode) {
  redis_server redis;
  rls_process p(redis.url(), {"--envoy-failure-mode", "rule"});
  ASSERT_EQ(response(run_client(p, {check(request_of({{"path", "/open"}}))}), 0).at("overall_code"),
            "OK");
  redis.kill();
  const auto results = run_client(
      p, {check(request_of({{"path", "/open"}})), check(request_of({{"remote_address", "x"}}))});
  EXPECT_EQ(response(results, 0).at("overall_code"), "OK") << "failure_mode: open";
  EXPECT_EQ(response(results, 1).at("overall_code"), "OVER_LIMIT") << "closed, the default";
  EXPECT_EQ(response(results, 1).at("statuses").at(0).at("code"), "OVER_LIMIT");
}

TEST(rls_grpc, bad_requests_get_invalid_argument_with_a_message) {
  rls_process p("");
  json::object no_domain = request_of({{"a", "b"}});
  no_domain["domain"] = "";
  json::object empty_key = request_of({{"", "b"}});
  json::object none{{"domain", "edge"}, {"descriptors", json::array{}}};
  json::object huge = request_of({{"a", "b"}});
  huge["descriptors"].as_array()[0].as_object()["entries"].as_array()[0].as_object()["value"] =
      std::string(100 * 1024, 'x');
  const auto results =
      run_client(p, {check(no_domain), check(empty_key), check(none), check(huge),
                     json::object{{"raw", "//8="}}});  // bytes that are no RateLimitRequest
  auto failure = [&](std::size_t i) { return results.at(i).as_array().at(0).as_object(); };
  EXPECT_EQ(failure(0).at("code"), 3);
  EXPECT_EQ(failure(0).at("details"), "domain must not be empty");
  EXPECT_EQ(failure(1).at("code"), 3);
  EXPECT_EQ(failure(1).at("details"), "descriptor 0 entry 0 has an empty key");
  EXPECT_EQ(failure(2).at("code"), 3);
  EXPECT_EQ(failure(3).at("code"), 8) << "RESOURCE_EXHAUSTED: over the 64 KiB message cap";
  EXPECT_TRUE(failure(4).contains("code")) << json::serialize(failure(4));
}

// grpc-timeout is the call's deadline: one already past when the call arrives is answered
// DEADLINE_EXCEEDED in trailers without asking the backend, so it charges nothing. Sent by curl
// over HTTP/2 (grpc-js refuses to send a call whose deadline has passed), whose verbose output
// shows the trailers.
TEST(rls_grpc, a_grpc_timeout_past_on_arrival_is_deadline_exceeded_and_charges_nothing) {
  rls_process p("");
  // RateLimitRequest{domain: "edge", descriptors: [{entries: [{remote_address: "late"}]}]},
  // length-prefixed.
  std::string body("\0\0\0\0\x20", 5);
  body += std::string("\x0a\x04", 2) + "edge" + std::string("\x12\x18\x0a\x16\x0a\x0e", 6) +
          "remote_address" + std::string("\x12\x04", 2) + "late";
  write_file(p.dir() + "/late.grpc", body);
  const auto curl = [&](const std::string& timeout_header) {
    const auto out = p.dir() + "/curl.out";
    const auto cmd =
        "curl -s -v --max-time 10 --http2-prior-knowledge -H 'content-type: "
        "application/grpc' -H 'te: trailers' " +
        timeout_header + " --data-binary @" + p.dir() + "/late.grpc http://" + p.address() +
        "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit -o /dev/null "
        "2>" +
        out;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return read_file(out);
  };
  const auto late = curl("-H 'grpc-timeout: 1n'");
  EXPECT_NE(late.find("< grpc-status: 4"), std::string::npos) << late;
  EXPECT_NE(late.find("deadline passed before it reached the backend"), std::string::npos) << late;
  auto peek = json::parse(R"({"domain":"edge","descriptors":[{"entries":[{"key":
      "remote_address","value":"late"}],"hits_addend":{"value":"0"}}]})")
                  .as_object();
  EXPECT_EQ(response(run_client(p, {check(peek)}), 0).at("statuses").at(0).at("limit_remaining"),
            30)
      << "not charged";
  const auto in_time = curl("-H 'grpc-timeout: 5S'");
  EXPECT_NE(in_time.find("< grpc-status: 0"), std::string::npos) << in_time;
  EXPECT_EQ(response(run_client(p, {check(peek)}), 0).at("statuses").at(0).at("limit_remaining"),
            29)
      << "the same bytes with time left are charged";
}

// Issue 24: a 1,100-byte :path made the whole call INVALID_ARGUMENT, so the per-IP descriptor
// in it went uncounted (Envoy fails open); so did a 17th descriptor. Now each is decided.
TEST(rls_grpc, a_long_value_or_a_17th_descriptor_does_not_fail_the_call) {
  rls_process p("");
  json::object long_path = request_of({{"path", "x"}, {"remote_address", "203.0.113.9"}});
  long_path["descriptors"].as_array()[0].as_object()["entries"].as_array()[0].as_object()["value"] =
      "/" + std::string(1100, 'p');
  json::array ds;
  for (int i = 0; i < 20; ++i)
    ds.push_back(json::object{
        {"entries", json::array{json::object{{"key", "remote_address"},
                                             {"value", "198.51.100." + std::to_string(i)}}}}});
  json::object twenty{{"domain", "edge"}, {"descriptors", ds}};
  const auto results = run_client(p, {check(long_path), check(twenty), check(twenty)});
  const auto& first = response(results, 0);
  EXPECT_EQ(first.at("overall_code"), "OK");
  EXPECT_EQ(first.at("statuses").at(1).at("limit_remaining"), 29) << "the address is charged";
  const auto& again = response(results, 2);
  ASSERT_EQ(again.at("statuses").as_array().size(), 20u);
  for (const auto& st : again.at("statuses").as_array())
    EXPECT_EQ(st.at("limit_remaining"), 28) << json::serialize(st);
}

// Upstream's configs through grpc-js on a real Redis: the block-list idiom (a limit of 0) and a
// wildcard in the middle of a value whose matches share one counter (share_threshold: True).
TEST(rls_grpc, a_blocked_address_and_a_shared_wildcard_on_redis) {
  redis_server redis;
  rls_process p(redis.url());
  const auto results =
      run_client(p, {check(request_of({{"remote_address", "50.0.0.5"}, {"path", "/api"}})),
                     check(request_of({{"path", "/files/a/raw"}})),
                     check(request_of({{"path", "/files/b/c/raw"}})),
                     check(request_of({{"path", "/files/d/raw"}})),
                     check(request_of({{"path", "/files/d/raw.txt"}}))});
  const auto& blocked = response(results, 0);
  EXPECT_EQ(blocked.at("overall_code"), "OVER_LIMIT");
  EXPECT_EQ(blocked.at("statuses").at(0).at("code"), "OVER_LIMIT");
  EXPECT_EQ(blocked.at("statuses").at(0).at("current_limit").at("requests_per_unit"), 0);
  EXPECT_EQ(blocked.at("statuses").at(1).at("limit_remaining"), 1000) << "refused: not charged";
  EXPECT_EQ(response(results, 1).at("statuses").at(0).at("limit_remaining"), 1);
  EXPECT_EQ(response(results, 2).at("statuses").at(0).at("limit_remaining"), 0);
  EXPECT_EQ(response(results, 3).at("overall_code"), "OVER_LIMIT") << "one counter for all three";
  EXPECT_TRUE(response(results, 4).at("statuses").at(0).at("current_limit").is_null())
      << "'/files/*/raw' does not match '/files/d/raw.txt'";
}

TEST(rls_grpc, sighup_reloads_the_envoy_config_and_a_bad_one_keeps_the_old) {
  rls_process p("");
  // 2 a minute (real clock), counted across two reloads (a 5 s wait for the log each) and two
  // client runs (node processes, up to 2 s each to start on a loaded machine).
  inside_one_window(1min, 2 * 5s + 2 * 2s);
  write_file(p.config_path(),
             "domain: edge\ndescriptors:\n  - key: remote_address\n"
             "    rate_limit: {unit: minute, requests_per_unit: 2}\n");
  p.fg().signal(SIGHUP);
  ASSERT_TRUE(p.fg().wait_for_log("envoy config reloaded"));
  auto results = run_client(p, {check(request_of({{"remote_address", "r"}}))});
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 1);

  write_file(p.config_path(),
             "domain: edge\ndescriptors:\n  - key: remote_address\n"
             "    rate_limit: {unit: minute, requests_per_unit: 2, unlimited: true}\n");
  const auto from = p.fg().log().size();
  p.fg().signal(SIGHUP);
  ASSERT_TRUE(p.fg().wait_for_log("envoy config reload rejected", 5s, from));
  EXPECT_NE(p.fg().log().find("edge.yaml:4:", from), std::string::npos) << p.fg().log();
  results = run_client(p, {check(request_of({{"remote_address", "r"}}))});
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 0);
}

TEST(rls_grpc, health_service_answers_serving) {
  rls_process p("");
  const auto results =
      run_client(p, {json::object{{"health", ""}},
                     json::object{{"health", "envoy.service.ratelimit.v3.RateLimitService"}},
                     json::object{{"health", "no.such.Service"}}});
  EXPECT_EQ(results.at(0).at(0).at("ok").at("status"), "SERVING");
  EXPECT_EQ(results.at(1).at(0).at("ok").at("status"), "SERVING");
  EXPECT_EQ(results.at(2).at(0).at("code"), 5) << "NOT_FOUND";
}

// grpc-js told to compress (gzip) sends grpc-encoding: gzip and flagged messages; upstream's
// grpc-go server has no decompressor and answers UNIMPLEMENTED in these words. Nothing is charged.
TEST(rls_grpc, a_compressed_call_is_unimplemented_as_upstream_answers_it) {
  rls_process p("");
  const auto refused =
      run_client(p, {check(request_of({{"remote_address", "z"}}, 30))}, {"--compress", "gzip"});
  EXPECT_EQ(refused.at(0).at(0).at("code"), 12) << json::serialize(refused);
  EXPECT_EQ(refused.at(0).at(0).at("details"),
            "grpc: Decompressor is not installed for grpc-encoding \"gzip\"");
  const auto after = run_client(p, {check(request_of({{"remote_address", "z"}}))});
  EXPECT_EQ(response(after, 0).at("statuses").at(0).at("limit_remaining"), 29)
      << "the compressed call's 30 hits were not counted";
}

TEST(rls_grpc, metrics_count_per_domain_and_rule) {
  rls_process p("");
  run_client(p, {check(request_of({{"remote_address", "m"}}), 3),
                 check(request_of({{"a", "b"}, {"", "c"}}))});
  const auto m = http_request_once(p.fg().port(), "GET", "/metrics").body;
  for (const char* line :
       {"floodgate_envoy_total_hits_total{domain=\"edge\",rule=\"remote_address\"} 3",
        "floodgate_envoy_within_limit_total{domain=\"edge\",rule=\"remote_address\"} 3",
        "floodgate_envoy_requests_total{code=\"OK\"} 3",
        "floodgate_envoy_requests_total{code=\"INVALID_ARGUMENT\"} 1",
        "floodgate_envoy_request_duration_seconds_count 4"})
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
  p.fg().signal(SIGTERM);
  EXPECT_EQ(p.fg().wait_exit(10s), 0);
}

TEST(rls_grpc, envoy_config_alone_needs_no_rules_file) {
  const auto dir = make_temp_dir("floodgate-rls-alone-");
  write_file(dir + "/edge.yaml", envoy_yaml);
  // Still serving when the run is cut short: killed, so no exit code (-1).
  const auto r = run_floodgated({"--envoy-config", dir + "/edge.yaml", "--listen", "127.0.0.1:0",
                                 "--grpc-listen", "127.0.0.1:0"},
                                1500ms);
  EXPECT_EQ(r.exit_code, -1) << r.output;
  EXPECT_NE(r.output.find("msg=\"grpc listening\""), std::string::npos) << r.output;
  EXPECT_EQ(run_floodgated({"--listen", "127.0.0.1:0"}).exit_code, 2) << "neither config";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(rls_grpc, a_bad_envoy_config_stops_start_up_naming_file_and_line) {
  const auto dir = make_temp_dir("floodgate-rls-bad-");
  write_file(dir + "/a.yaml",
             "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, "
             "requests_per_unit: 1}\n");
  const auto r = run_floodgated({"--envoy-config", dir, "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(dir + "/a.yaml:4: descriptor 'a': rate_limit: unit must be"),
            std::string::npos)
      << r.output;
  const auto help = run_floodgated({"--help"});
  for (const char* flag : {"--grpc-listen", "--envoy-config", "--envoy-response-headers",
                           "--envoy-shadow-mode", "--envoy-failure-mode"})
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace floodgate::test
