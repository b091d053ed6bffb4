// The real floodgated over loopback: exact limits under concurrent clients from several
// processes, headers, honest retry_after, reloads, shutdown, start-up errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "real_clock_window.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

json::object json_of(const http_reply& r) {
  return json::parse(r.body).as_object();
}

std::string check_body(const std::string& rule, const std::string& key, int cost = 1) {
  return R"({"rule":")" + rule + R"(","key":")" + key + R"(","cost":)" + std::to_string(cost) + "}";
}

TEST(floodgated, help_names_every_flag) {
  const auto r = run_floodgated({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--config", "--redis", "--listen", "--io-threads", "--max-connections",
                           "--max-connections-per-peer", "--log-level", "SIGHUP", "SIGTERM"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << "\n" << r.output;
}

TEST(floodgated, usage_errors_exit_2) {
  EXPECT_EQ(run_floodgated({}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config"}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--bogus"}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--log-level", "loud"}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--log-level", "warnings"}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--listen", "localhost"}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--io-threads", "0"}).exit_code, 2);
  EXPECT_EQ(run_floodgated({"--config", "x.yaml", "--io-threads", "two"}).exit_code, 2);
}

// The log lines say level=warning: the flag takes that spelling too. (Past the flags, the
// missing file is what stops it: exit 1, where a refused flag is 2.)
TEST(floodgated, log_level_warning_is_accepted) {
  const auto r = run_floodgated({"--config", "/nonexistent/rules.yaml", "--log-level", "warning"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("level=critical msg=\"invalid configuration\""), std::string::npos)
      << r.output;
}

// Backend errors are logged at most once a second; what that held back is reported when the
// incident ends (a second after the line), not with the next incident's first line, which may
// come hours later.
TEST(floodgated, backend_errors_held_back_by_the_log_throttle_are_reported_when_they_stop) {
  floodgated_process::options o;
  o.extra_args = {"--redis", "redis://127.0.0.1:1"};  // nothing listens on port 1
  floodgated_process fg("rules:\n  - {name: api, algorithm: sliding_log, limit: 5, window: 1m}\n",
                        o);
  http_connection c(fg.port());
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(c.request("POST", "/v1/check", check_body("api", "k")).status, 503);
  EXPECT_TRUE(fg.wait_for_log("msg=\"backend error"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (throttled_events(fg.log(), "backend error") < 10 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(throttled_events(fg.log(), "backend error"), 10) << fg.log();
  EXPECT_NE(fg.log().find("msg=\"backend errors not logged since the last line\" count="),
            std::string::npos)
      << fg.log();
}

TEST(floodgated, a_bad_config_stops_start_up_naming_file_and_line) {
  char dir[] = "/tmp/floodgated-bad-XXXXXX";
  ASSERT_TRUE(::mkdtemp(dir));
  const std::string path = std::string(dir) + "/rules.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("rules:\n  - name: api\n    algorithm: sliding_log\n    limit: 0\n    window: 60s\n",
               f);
    std::fclose(f);
  }
  const auto r = run_floodgated({"--config", path, "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(path + ":4: rule 'api': limit must be at least 1 (got 0)"),
            std::string::npos)
      << r.output;
  const auto missing = run_floodgated({"--config", path + ".nope", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("cannot open"), std::string::npos) << missing.output;
  std::remove(path.c_str());
  ::rmdir(dir);
}

TEST(floodgated, a_busy_port_stops_start_up) {
  floodgated_process first("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n");
  char dir[] = "/tmp/floodgated-busy-XXXXXX";
  ASSERT_TRUE(::mkdtemp(dir));
  const std::string path = std::string(dir) + "/rules.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n", f);
    std::fclose(f);
  }
  const auto r =
      run_floodgated({"--config", path, "--listen", "127.0.0.1:" + std::to_string(first.port())});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                          " (--listen)"),
            std::string::npos)
      << r.output;
  // Which listener could not: a careless --admin-listen equal to --listen said only "cannot
  // listen on HOST:PORT: Address already in use", as if something else held the port.
  const auto port = "127.0.0.1:" + std::to_string(first.port());
  const auto admin = run_floodgated(
      {"--config", path, "--listen", "127.0.0.1:0", "--admin-listen", port});
  EXPECT_EQ(admin.exit_code, 1);
  EXPECT_NE(admin.output.find("cannot listen on " + port + " (--admin-listen)"), std::string::npos)
      << admin.output;
  std::remove(path.c_str());
  ::rmdir(dir);
}

TEST(floodgated, probes_answer) {
  floodgated_process fg("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n");
  EXPECT_EQ(http_request_once(fg.port(), "GET", "/healthz").status, 200);
  const auto ready = http_request_once(fg.port(), "GET", "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_NE(ready.body.find("memory"), std::string::npos);
  const auto m = http_request_once(fg.port(), "GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  // At least this one (earlier ones may not have been noticed closing yet).
  const auto gauge = m.body.find("\nfloodgate_open_connections ");
  ASSERT_NE(gauge, std::string::npos) << m.body;
  EXPECT_GE(std::stoi(m.body.substr(gauge + 28)), 1);
  EXPECT_EQ(m.header("Content-Type").value_or("").substr(0, 10), "text/plain");
  http_connection c(fg.port());
  const auto head = c.request("HEAD", "/healthz");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(c.request("GET", "/healthz").status, 200) << "HEAD left the connection usable";
}

TEST(floodgated, check_headers_and_an_honest_retry_after) {
  floodgated_process fg(R"(rules:
  - {name: short, algorithm: sliding_log, limit: 2, window: 400ms}
  - {name: paced, algorithm: gcra, limit: 5, window: 1s, burst: 1}
)");
  http_connection c(fg.port());
  // Honest means exact: the key's oldest admission ages out (sliding_log) or its next slot
  // comes (gcra) that long after the denial. floodgated decides on its own clock at some
  // instant between sending and receiving, so the truth lies in
  //   [period - (denial received - first sent), period - (denial sent - first received)],
  // widened by 1 ms for whole-millisecond rounding on both ends.
  using clock = std::chrono::steady_clock;
  const auto ms_between = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count() / 1000.0;
  };
  const auto expect_exact_retry = [&](std::int64_t retry_ms, std::int64_t period_ms,
                                      clock::time_point first_sent, clock::time_point first_got,
                                      clock::time_point denial_sent, clock::time_point denial_got) {
    EXPECT_GE(retry_ms, period_ms - ms_between(first_sent, denial_got) - 1);
    EXPECT_LE(retry_ms, period_ms - ms_between(first_got, denial_sent) + 1);
  };
  clock::time_point first_sent, first_got;
  for (int i = 0; i < 2; ++i) {
    if (i == 0) first_sent = clock::now();
    const auto r = c.request("POST", "/v1/check", check_body("short", "k"));
    if (i == 0) first_got = clock::now();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("RateLimit-Policy").value_or(""), R"("short";q=2;w=1)");
    EXPECT_EQ(r.header("RateLimit").value_or(""), "\"short\";r=" + std::to_string(1 - i) + ";t=1");
    EXPECT_FALSE(r.header("Retry-After"));
  }
  const auto denial_sent = clock::now();
  const auto denied = c.request("POST", "/v1/check", check_body("short", "k"));
  const auto denial_got = clock::now();
  ASSERT_EQ(denied.status, 429);
  EXPECT_EQ(denied.header("Retry-After").value_or(""), "1");
  auto body = json_of(denied);
  EXPECT_FALSE(body["allowed"].as_bool());
  const auto retry_ms = body["retry_after_ms"].as_int64();
  EXPECT_GT(retry_ms, 0);
  expect_exact_retry(retry_ms, 400, first_sent, first_got, denial_sent, denial_got);
  // Peeking (cost 0) consumes nothing and is always allowed.
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("short", "k", 0)).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(retry_ms));
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("short", "k")).status, 200)
      << "a retry after retry_after_ms succeeds";

  const auto paced_first_sent = clock::now();
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("paced", "k")).status, 200);
  const auto paced_first_got = clock::now();
  const auto paced = c.request("POST", "/v1/check", check_body("paced", "k"));
  const auto paced_got = clock::now();
  ASSERT_EQ(paced.status, 429);
  const auto paced_ms = json_of(paced)["retry_after_ms"].as_int64();
  EXPECT_GT(paced_ms, 0);
  // One request every 200 ms (limit 5 per 1 s, burst 1).
  expect_exact_retry(paced_ms, 200, paced_first_sent, paced_first_got, paced_first_got, paced_got);
  std::this_thread::sleep_for(std::chrono::milliseconds(paced_ms));
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("paced", "k")).status, 200);
}

TEST(floodgated, auth_endpoint_for_nginx) {
  floodgated_process fg(R"(rules:
  - {name: api, algorithm: fixed_window, limit: 2, window: 1h, key: "header:X-Api-Key"}
  - {name: ip, algorithm: sliding_log, limit: 1, window: 1h}
trusted_proxies: [127.0.0.1]
)");
  http_connection c(fg.port());
  const std::vector<std::pair<std::string, std::string>> key = {{"X-Api-Key", "alice"}};
  EXPECT_EQ(c.request("GET", "/v1/auth/api", {}, key).status, 204);
  const auto second = c.request("GET", "/v1/auth/api", {}, key);
  EXPECT_EQ(second.status, 204);
  EXPECT_EQ(second.header("RateLimit").value_or("").substr(0, 12), R"("api";r=0;t=)");
  const auto denied = c.request("GET", "/v1/auth/api", {}, key);
  EXPECT_EQ(denied.status, 403);
  EXPECT_TRUE(denied.header("Retry-After"));
  EXPECT_EQ(denied.header("RateLimit-Policy").value_or(""), R"("api";q=2;w=3600)");
  EXPECT_EQ(c.request("GET", "/v1/auth/api", {}, {{"X-Api-Key", "bob"}}).status, 204);
  EXPECT_EQ(c.request("GET", "/v1/auth/api").status, 400) << "no key header";
  EXPECT_EQ(c.request("GET", "/v1/auth/nope").status, 404);
  // remote_addr: X-Real-IP when given by a trusted proxy (127.0.0.1 here), else the peer.
  EXPECT_EQ(c.request("GET", "/v1/auth/ip", {}, {{"X-Real-IP", "192.0.2.1"}}).status, 204);
  EXPECT_EQ(c.request("GET", "/v1/auth/ip", {}, {{"X-Real-IP", "192.0.2.1"}}).status, 403);
  EXPECT_EQ(c.request("GET", "/v1/auth/ip").status, 204) << "127.0.0.1 is another key";
  EXPECT_EQ(c.request("GET", "/v1/auth/ip").status, 403);
}

TEST(floodgated, multi_rule_check_is_all_or_nothing) {
  floodgated_process fg(R"(rules:
  - {name: user, algorithm: sliding_log, limit: 5, window: 1h}
  - {name: global, algorithm: sliding_log, limit: 3, window: 1h}
)");
  http_connection c(fg.port());
  auto both = [&](const std::string& user) {
    return c.request(
        "POST", "/v1/check",
        R"({"rules":[{"rule":"user","key":")" + user + R"("},{"rule":"global","key":"all"}]})");
  };
  EXPECT_EQ(both("a").status, 200);
  EXPECT_EQ(both("b").status, 200);
  EXPECT_EQ(both("a").status, 200);
  const auto denied = both("a");
  EXPECT_EQ(denied.status, 429);
  auto body = json_of(denied);
  EXPECT_FALSE(body["allowed"].as_bool());
  auto& results = body["results"].as_array();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].as_object().at("allowed").as_bool());
  EXPECT_EQ(results[0].as_object().at("remaining").as_int64(), 2)
      << "user a used 2 of 5; alone, this request would leave 2";
  EXPECT_FALSE(results[1].as_object().at("allowed").as_bool());
  // The denied request consumed nothing from the user rule.
  const auto peek = c.request("POST", "/v1/check", R"({"rule":"user","key":"a","cost":0})");
  EXPECT_EQ(json_of(peek)["remaining"].as_int64(), 3);
}

// A group over /v1/auth: each rule keyed by its own source, all-or-nothing. Mixed key sources
// are fine on one store (here memory://).
TEST(floodgated, auth_on_a_group_is_all_or_nothing_with_each_rules_key) {
  floodgated_process fg(R"(rules:
  - {name: user, algorithm: sliding_log, limit: 3, window: 1h, key: "header:X-User-Id"}
  - {name: ip, algorithm: sliding_log, limit: 2, window: 1h}
groups:
  - {name: login, rules: [user, ip]}
trusted_proxies: [127.0.0.1]
)");
  http_connection c(fg.port());
  auto login = [&](const std::string& user, const std::string& ip) {
    return c.request("GET", "/v1/auth/login", {}, {{"X-User-Id", user}, {"X-Real-IP", ip}});
  };
  EXPECT_EQ(login("alice", "192.0.2.1").status, 204);
  EXPECT_EQ(login("alice", "192.0.2.1").status, 204);
  const auto denied = login("alice", "192.0.2.1");
  EXPECT_EQ(denied.status, 403) << "the address is spent";
  EXPECT_EQ(denied.header("RateLimit-Policy").value_or(""),
            R"("user";q=3;w=3600, "ip";q=2;w=3600)");
  // The denied login consumed nothing from alice: one more from another address passes...
  EXPECT_EQ(login("alice", "192.0.2.2").status, 204);
  // ...and then alice is spent, whatever the address.
  EXPECT_EQ(login("alice", "192.0.2.3").status, 403);
  EXPECT_EQ(login("bob", "192.0.2.3").status, 204);

  const auto group_check =
      c.request("POST", "/v1/check", R"({"group":"login","key":"carol","cost":2})");
  EXPECT_EQ(group_check.status, 200) << group_check.body;
  auto body = json_of(group_check);
  EXPECT_EQ(body["group"].as_string(), "login");
  EXPECT_EQ(body["results"].as_array().size(), 2u);
  EXPECT_EQ(c.request("POST", "/v1/check", R"({"group":"login","key":"carol"})").status, 429)
      << "ip allows 2 per key: carol used them";
}

// On Redis Cluster a group's rules must share their key (the hash tag): a file that breaks it
// stops start-up, before the first request. The cluster need not be up to know that.
TEST(floodgated, on_redis_cluster_a_group_with_different_keys_stops_start_up) {
  char dir[] = "/tmp/floodgated-group-XXXXXX";
  ASSERT_TRUE(::mkdtemp(dir));
  const std::string path = std::string(dir) + "/rules.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(R"(rules:
  - {name: user, algorithm: sliding_log, limit: 3, window: 1h, key: "header:X-User-Id"}
  - {name: ip, algorithm: sliding_log, limit: 2, window: 1h}
groups:
  - name: login
    rules: [user, ip]
)",
               f);
    std::fclose(f);
  }
  const auto r = run_floodgated(
      {"--config", path, "--listen", "127.0.0.1:0", "--redis", "redis+cluster://127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(path + ":6: group 'login': rules 'user' (key header:X-User-Id) and "
                                 "'ip' (key remote_addr) take different keys"),
            std::string::npos)
      << r.output;
  std::remove(path.c_str());
  ::rmdir(dir);
}

// Several client processes, each with several keep-alive connections, hammer one key: an
// exact algorithm admits exactly its limit.
TEST(floodgated, limits_hold_exactly_under_concurrent_clients_from_several_processes) {
  constexpr int limit = 60;
  floodgated_process fg(R"(rules:
  - {name: log, algorithm: sliding_log, limit: 60, window: 1h}
  - {name: fixed, algorithm: fixed_window, limit: 60, window: 24h}
  - {name: bucket, algorithm: token_bucket, limit: 60, window: 24h}
  - {name: gcra, algorithm: gcra, limit: 60, window: 24h}
)");
  constexpr int processes = 4;
  constexpr int connections = 3;
  constexpr int requests = 15;  // per connection: 180 per rule in all, 3x the limit
  const std::vector<std::string> rules = {"log", "fixed", "bucket", "gcra"};
  // `fixed` is a day aligned to 00:00 UTC (real clock): 720 requests, seconds even under a
  // sanitizer, all in one day.
  inside_one_window(std::chrono::hours(24), std::chrono::seconds(30));

  int pipes[processes][2];
  pid_t children[processes];
  for (int p = 0; p < processes; ++p) {
    ASSERT_EQ(::pipe(pipes[p]), 0);
    children[p] = ::fork();
    ASSERT_GE(children[p], 0);
    if (children[p] == 0) {
      ::close(pipes[p][0]);
      std::vector<int> admitted(rules.size() + 1, 0);
      std::vector<std::thread> threads;
      std::vector<std::vector<int>> per_thread(connections, std::vector<int>(rules.size() + 1, 0));
      for (int t = 0; t < connections; ++t)
        threads.emplace_back([&, t] {
          try {
            http_connection c(fg.port());
            for (int i = 0; i < requests; ++i)
              for (std::size_t r = 0; r < rules.size(); ++r) {
                const auto reply = c.request("POST", "/v1/check", check_body(rules[r], "shared"));
                if (reply.status == 200)
                  ++per_thread[t][r];
                else if (reply.status != 429)
                  ++per_thread[t][rules.size()];  // anything else
              }
          } catch (...) {
            ++per_thread[t][rules.size()];
          }
        });
      for (auto& th : threads) th.join();
      for (const auto& counts : per_thread)
        for (std::size_t r = 0; r <= rules.size(); ++r) admitted[r] += counts[r];
      const auto bytes = static_cast<ssize_t>(admitted.size() * sizeof(int));
      ::_exit(::write(pipes[p][1], admitted.data(), admitted.size() * sizeof(int)) == bytes ? 0
                                                                                            : 1);
    }
    ::close(pipes[p][1]);
  }
  std::vector<int> total(rules.size() + 1, 0);
  for (int p = 0; p < processes; ++p) {
    std::vector<int> counts(rules.size() + 1, 0);
    const auto n = ::read(pipes[p][0], counts.data(), counts.size() * sizeof(int));
    ::close(pipes[p][0]);
    int status = 0;
    ::waitpid(children[p], &status, 0);
    ASSERT_EQ(n, static_cast<ssize_t>(counts.size() * sizeof(int)));
    for (std::size_t r = 0; r < counts.size(); ++r) total[r] += counts[r];
  }
  for (std::size_t r = 0; r < rules.size(); ++r) EXPECT_EQ(total[r], limit) << rules[r];
  EXPECT_EQ(total[rules.size()], 0) << "responses other than 200/429, or failed connections";

  const auto m = http_request_once(fg.port(), "GET", "/metrics").body;
  EXPECT_NE(m.find(R"(floodgate_decisions_total{rule="log",result="allowed"} 60)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(R"(floodgate_decisions_total{rule="log",result="denied"} 120)"),
            std::string::npos);
}

TEST(floodgated, sighup_reloads_a_good_file_and_keeps_the_old_rules_for_a_bad_one) {
  floodgated_process fg("rules:\n  - {name: a, algorithm: sliding_log, limit: 1, window: 1h}\n");
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/check", check_body("b", "k")).status, 400);

  fg.write_rules(R"(rules:
  - {name: a, algorithm: sliding_log, limit: 1, window: 1h}
  - {name: b, algorithm: sliding_log, limit: 5, window: 1h}
)");
  fg.signal(SIGHUP);
  ASSERT_TRUE(fg.wait_for_log("msg=\"config reloaded\"")) << fg.log();
  const auto b = http_request_once(fg.port(), "POST", "/v1/check", check_body("b", "k"));
  EXPECT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(json_of(b)["limit"].as_int64(), 5);

  const auto before = fg.log().size();
  fg.write_rules(
      "rules:\n  - name: b\n    algorithm: sliding_log\n    limit: -3\n    window: 1h\n");
  fg.signal(SIGHUP);
  ASSERT_TRUE(fg.wait_for_log("reload rejected", 5s, before)) << fg.log();
  EXPECT_NE(
      fg.log().find(fg.rules_path() + ":4: rule 'b': limit must be at least 1 (got -3)", before),
      std::string::npos)
      << fg.log();
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/check", check_body("b", "k")).status, 200)
      << "the old rules stay";
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/check", check_body("a", "k")).status, 200);

  const auto m = http_request_once(fg.port(), "GET", "/metrics").body;
  EXPECT_NE(m.find(R"(floodgate_config_reloads_total{result="success"} 1)"), std::string::npos);
  EXPECT_NE(m.find(R"(floodgate_config_reloads_total{result="failure"} 1)"), std::string::npos);
}

// A careless operator's SIGHUP with the rules path now a FIFO (or a directory): the reload runs
// on the thread that accepts connections, and open() of a FIFO with no writer blocked it: no
// new connection was served, and SIGTERM was not heard either. Now refused like a bad file.
TEST(floodgated, sighup_refuses_a_rules_path_that_is_not_a_regular_file) {
  floodgated_process fg("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n");
  const auto before = fg.log().size();
  std::remove(fg.rules_path().c_str());
  ASSERT_EQ(::mkfifo(fg.rules_path().c_str(), 0600), 0);
  fg.signal(SIGHUP);
  ASSERT_TRUE(fg.wait_for_log("msg=\"SIGHUP: reloading config\"", 5s, before)) << fg.log();
  // The old rules serve on a new connection (accepted by the thread that took the signal).
  const auto r = http_request_once(fg.port(), "POST", "/v1/check", check_body("a", "k"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(fg.wait_for_log("reload rejected", 1s, before)) << fg.log();
  EXPECT_NE(fg.log().find(fg.rules_path() + ": not a regular file (a FIFO)", before),
            std::string::npos)
      << fg.log();
  fg.signal(SIGTERM);
  EXPECT_EQ(fg.wait_exit(5s), 0);
}

// The same with --envoy-config (issue 28, item 4): the Envoy config was opened with a bare
// std::ifstream on the thread that took the signal, so a FIFO there froze the accept thread:
// no new HTTP connection was served until something wrote to the FIFO. Now refused like the
// rules file, and the reload runs off the accept thread.
TEST(floodgated, sighup_refuses_an_envoy_config_that_is_not_a_regular_file) {
  const auto dir = make_temp_dir("floodgate-envoy-fifo-");
  const auto envoy_path = dir + "/edge.yaml";
  std::ofstream(envoy_path) << "domain: edge\ndescriptors:\n  - key: remote_address\n"
                               "    rate_limit: {unit: minute, requests_per_unit: 2}\n";
  floodgated_process::options o;
  o.extra_args = {"--grpc-listen", "127.0.0.1:0", "--envoy-config", envoy_path};
  floodgated_process fg("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n", o);
  const auto before = fg.log().size();
  std::remove(envoy_path.c_str());
  ASSERT_EQ(::mkfifo(envoy_path.c_str(), 0600), 0);
  fg.signal(SIGHUP);
  ASSERT_TRUE(fg.wait_for_log("msg=\"SIGHUP: reloading config\"", 5s, before)) << fg.log();
  // A new connection is served: a fresh process answers in milliseconds; the client's 5 s
  // timeout is what a frozen accept thread would run into.
  const auto r = http_request_once(fg.port(), "POST", "/v1/check", check_body("a", "k"));
  EXPECT_EQ(r.status, 200) << r.body;
  const bool refused = fg.wait_for_log("envoy config reload rejected", 1s, before);
  if (!refused) {  // frozen in open(): a writer that comes and goes lets it return
    const int w = ::open(envoy_path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  EXPECT_TRUE(refused) << fg.log();
  EXPECT_NE(fg.log().find(envoy_path + ": not a regular file (a FIFO)", before), std::string::npos)
      << fg.log();
  EXPECT_TRUE(fg.wait_for_log("msg=\"config reloaded\"", 1s, before))
      << "the rules file is still reloaded\n"
      << fg.log();
  fg.signal(SIGTERM);
  EXPECT_EQ(fg.wait_exit(5s), 0);
  std::filesystem::remove_all(dir);
}

// A reload reads and parses the files on a thread of its own: a big rules file (40,000 rules,
// about a second here) no longer holds the thread that accepts connections. Before, a new
// connection made during the reload was served only once the reload was over.
TEST(floodgated, sighup_reloads_off_the_thread_that_accepts) {
  floodgated_process fg("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n");
  std::string big = "rules:\n";
  for (int i = 0; i < 40'000; ++i)
    big += "  - {name: r" + std::to_string(i) + ", algorithm: gcra, limit: 1, window: 1s}\n";
  fg.write_rules(big);
  const auto before = fg.log().size();
  fg.signal(SIGHUP);
  ASSERT_TRUE(fg.wait_for_log("msg=\"SIGHUP: reloading config\"", 5s, before)) << fg.log();
  const auto r = http_request_once(fg.port(), "GET", "/healthz");
  const bool reload_was_over = fg.log().find("config reloaded", before) != std::string::npos;
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(reload_was_over) << "the new connection waited for the reload\n"
                                << fg.log().substr(before);
  // A ceiling, not a wait: it returns when the line appears (about a second).
  ASSERT_TRUE(fg.wait_for_log("rules=40000 ", 60s, before)) << fg.log().substr(before);
  EXPECT_EQ(http_request_once(fg.port(), "POST", "/v1/check", check_body("r39999", "k")).status,
            200);
}

TEST(floodgated, sigterm_closes_idle_connections_and_exits_0) {
  floodgated_process fg("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n");
  http_connection idle(fg.port());
  EXPECT_EQ(idle.request("GET", "/healthz").status, 200);  // now idle, kept alive
  http_connection fresh(fg.port());                        // connected, nothing sent
  const auto start = std::chrono::steady_clock::now();
  fg.signal(SIGTERM);
  EXPECT_EQ(fg.wait_exit(5s), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(idle.closed_by_peer(1s));
  EXPECT_TRUE(fresh.closed_by_peer(1s));
  EXPECT_NE(fg.log().find("msg=\"stopped\""), std::string::npos);
}

// Each I/O thread serves its own connections: limits still hold exactly across them, and
// SIGTERM stops every thread.
TEST(floodgated, io_threads_share_the_limits_and_all_stop_on_sigterm) {
  for (const char* threads : {"1", "3"}) {
    floodgated_process::options o;
    o.extra_args = {"--io-threads", threads};
    floodgated_process fg("rules:\n  - {name: a, algorithm: fixed_window, limit: 20, window: 1h}\n",
                          o);
    EXPECT_NE(fg.log().find(std::string("threads=") + threads), std::string::npos) << fg.log();
    std::vector<std::unique_ptr<http_connection>> conns;
    for (int i = 0; i < 6; ++i) conns.push_back(std::make_unique<http_connection>(fg.port()));
    int allowed = 0;
    int denied = 0;
    for (int round = 0; round < 5; ++round)
      for (auto& c : conns) {
        const int status = c->request("GET", "/v1/auth/a").status;
        allowed += status == 204;
        denied += status == 403;
      }
    EXPECT_EQ(allowed, 20) << threads;
    EXPECT_EQ(denied, 10) << threads;
    fg.signal(SIGTERM);
    EXPECT_EQ(fg.wait_exit(5s), 0) << threads;
    for (auto& c : conns) EXPECT_TRUE(c->closed_by_peer(1s));
  }
}

// The bytes on the wire: status line, Server, the handler's headers, Content-Length (not for
// 204), Connection as HTTP/1.0 and 1.1 want it, no body for HEAD.
TEST(floodgated, responses_on_the_wire) {
  floodgated_process fg("rules:\n  - {name: a, algorithm: fixed_window, limit: 100, window: 1h}\n");
  {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw("GET /v1/auth/a HTTP/1.1\r\nHost: x\r\n\r\n"));
    const auto r = c.read_reply();
    EXPECT_EQ(r.status, 204);
    EXPECT_EQ(r.header("Server").value_or(""), "floodgated");
    EXPECT_FALSE(r.header("Content-Length"));
    EXPECT_FALSE(r.header("Connection"));
    EXPECT_EQ(r.header("RateLimit-Policy").value_or(""), R"("a";q=100;w=3600)");
    ASSERT_TRUE(c.send_raw("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    const auto head = c.read_reply(true);
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.header("Content-Length").value_or(""), "16");  // {"status":"ok"}\n
    EXPECT_EQ(head.body, "");
    ASSERT_TRUE(c.send_raw("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const auto last = c.read_reply();
    EXPECT_EQ(last.body, "{\"status\":\"ok\"}\n");
    EXPECT_EQ(last.header("Connection").value_or(""), "close");
    EXPECT_TRUE(c.closed_by_peer(1s));
  }
  {
    http_connection c(fg.port());
    ASSERT_TRUE(c.send_raw("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    const auto r = c.read_reply();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("Connection").value_or(""), "keep-alive");
    ASSERT_TRUE(c.send_raw("GET /healthz HTTP/1.0\r\n\r\n"));
    const auto last = c.read_reply();
    EXPECT_EQ(last.status, 200);
    EXPECT_FALSE(last.header("Connection"));
    EXPECT_TRUE(c.closed_by_peer(1s));
  }
}

TEST(floodgated, sigterm_with_no_connections_exits_0) {
  floodgated_process fg("rules:\n  - {name: a, algorithm: gcra, limit: 1, window: 1s}\n");
  fg.signal(SIGTERM);
  EXPECT_EQ(fg.wait_exit(5s), 0);
}

}  // namespace
}  // namespace floodgate::test

// The destructor's sanitizer check reads the log with this: the head of the first report, from
// the start of its line, whichever sanitizer wrote it; nothing for a clean log.
TEST(floodgated_process_support, finds_the_first_sanitizer_report_in_a_log) {
  using floodgate::test::sanitizer_report;
  EXPECT_EQ(sanitizer_report("ts=1 level=info msg=\"listening\" port=1\n"), "");
  const std::string asan =
      "ts=1 level=info msg=\"listening\"\n==42==ERROR: AddressSanitizer: heap-use-after-free\n"
      "    #0 0x1 in f\n";
  EXPECT_EQ(sanitizer_report(asan), asan.substr(asan.find("==42==")));
  EXPECT_EQ(sanitizer_report("a\nstream.cpp:288:3: runtime error: load of null pointer\n"),
            "stream.cpp:288:3: runtime error: load of null pointer\n");
  EXPECT_NE(sanitizer_report("==7==ERROR: LeakSanitizer: detected memory leaks\n"), "");
}
