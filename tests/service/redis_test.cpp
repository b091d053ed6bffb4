// floodgated on a real redis-server: several floodgated share one Redis and still hold a limit
// exactly; Redis dying under load turns into 200 degraded (fail-open) and 503 (fail-closed)
// within the call deadline, and normal decisions come back with Redis.
//
// Skipped while make_backend() does not know redis:// yet.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <memory>
#include <mutex>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "info_text.hpp"
#include "metrics_text.hpp"
#include "pacer.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Polls /readyz until it says 200; false if it does not within `within`.
bool wait_ready(const floodgated_process& fg, std::chrono::milliseconds within = 5s) {
  for (auto deadline = clock_type::now() + within; clock_type::now() < deadline;) {
    if (http_request_once(fg.port(), "GET", "/readyz").status == 200) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// floodgated on `url`, connected to it (the backend connects in the background). Every build
// has the Redis backend: a floodgated that cannot start on it fails the test, never skips it.
std::unique_ptr<floodgated_process> start_on_redis(const std::string& rules,
                                                   const std::string& url) {
  floodgated_process::options opts;
  opts.extra_args = {"--redis", url};
  auto fg = std::make_unique<floodgated_process>(rules, opts);
  if (!wait_ready(*fg)) throw std::runtime_error("floodgated never became ready:\n" + fg->log());
  return fg;
}

#define START_ON_REDIS(var, rules, url) auto var = start_on_redis(rules, url)

std::string check_body(const std::string& rule, const std::string& key) {
  return R"({"rule":")" + rule + R"(","key":")" + key + "\"}";
}

// Polls until floodgated's log holds `text`; false after `within`.
bool wait_log(const floodgated_process& fg, std::string_view text,
              std::chrono::milliseconds within = 5s) {
  for (auto deadline = clock_type::now() + within; clock_type::now() < deadline;) {
    if (fg.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// A misconfigured Redis is loud: the server's own words in the log, and /readyz 503 while
// every check fails for a reason that will not heal by itself (before: "backend replied with
// an error" at most, and /readyz 200 with an ACL user without EVALSHA).
TEST(redis, a_misconfigured_redis_is_logged_in_its_own_words_and_not_ready) {
  redis_server redis;
  redis.command(
      {"ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all", "-evalsha", "-fcall"});
  const std::string rules = "rules:\n  - {name: api, algorithm: gcra, limit: 10, window: 1s}\n";
  const std::string host = "@127.0.0.1:" + std::to_string(redis.port());
  {
    floodgated_process::options opts;
    opts.extra_args = {"--redis", "redis://noscripts:wrong" + host};
    floodgated_process fg(rules, opts);
    EXPECT_TRUE(wait_log(fg, "WRONGPASS")) << fg.log();
    EXPECT_NE(fg.log().find("msg=\"backend failing\""), std::string::npos) << fg.log();
    EXPECT_EQ(http_request_once(fg.port(), "GET", "/readyz").status, 503);
  }
  START_ON_REDIS(fg, rules, "redis://noscripts:pw" + host);  // it connects: ready at first
  EXPECT_EQ(http_request_once(fg->port(), "POST", "/v1/check", check_body("api", "k")).status, 503);
  EXPECT_EQ(http_request_once(fg->port(), "GET", "/readyz").status, 503);
  EXPECT_TRUE(wait_log(*fg, "NOPERM")) << fg->log();

  redis.command({"ACL", "SETUSER", "noscripts", "+evalsha"});
  EXPECT_EQ(http_request_once(fg->port(), "POST", "/v1/check", check_body("api", "k")).status, 200);
  EXPECT_TRUE(wait_ready(*fg));
  EXPECT_TRUE(wait_log(*fg, "backend answering again")) << fg->log();
}

TEST(redis, floodgated_instances_sharing_redis_hold_the_limit_exactly) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: log, algorithm: sliding_log, limit: 40, window: 1h}
  - {name: gcra, algorithm: gcra, limit: 40, window: 24h}
)";
  START_ON_REDIS(a, rules, redis.url());
  START_ON_REDIS(b, rules, redis.url());
  EXPECT_EQ(http_request_once(a->port(), "GET", "/readyz").status, 200);

  std::atomic<int> log_ok{0}, gcra_ok{0}, other{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t)
    clients.emplace_back([&, port = (t % 2 ? a : b)->port()] {
      http_connection c(port);
      for (int i = 0; i < 20; ++i) {
        const auto l = c.request("POST", "/v1/check", check_body("log", "shared")).status;
        const auto g = c.request("POST", "/v1/check", check_body("gcra", "shared")).status;
        log_ok += l == 200;
        gcra_ok += g == 200;
        other += (l != 200 && l != 429) + (g != 200 && g != 429);
      }
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(log_ok, 40);
  EXPECT_EQ(gcra_ok, 40);
  EXPECT_EQ(other, 0);

  // Both instances see the one shared state.
  const auto peek = http_request_once(a->port(), "POST", "/v1/check",
                                      R"({"rule":"log","key":"shared","cost":0})");
  EXPECT_EQ(json::parse(peek.body).as_object()["remaining"].as_int64(), 0);
}

struct sample {
  clock_type::time_point at;
  std::string rule;
  int status;
  bool degraded;
  clock_type::duration took;
};

TEST(redis, redis_dying_under_load_means_degraded_or_503_within_the_deadline_then_recovers) {
  redis_server redis;
  START_ON_REDIS(fg, R"(rules:
  - {name: open, algorithm: sliding_log, limit: 1000000, window: 1h, failure_mode: open}
  - {name: closed, algorithm: token_bucket, limit: 1000000, window: 1h, failure_mode: closed}
)",
                redis.url());

  std::mutex mutex;
  std::vector<sample> samples;
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int t = 0; t < 3; ++t)
    load.emplace_back([&, t] {
      http_connection c(fg->port());
      // With Redis dead, floodgated answers at once (not connected): unpaced, three clients
      // and the server spin on two cores while Redis restarts. At this rate the shortest span
      // read below (200 ms) still holds over a hundred requests.
      pacer pace{200};
      for (int i = 0; !stop; ++i) {
        pace();
        const std::string rule = (i + t) % 2 ? "open" : "closed";
        const auto start = clock_type::now();
        const auto r =
            c.request("POST", "/v1/check", check_body(rule, "k" + std::to_string(i % 7)));
        const auto took = clock_type::now() - start;
        const bool degraded = r.body.find("\"degraded\":true") != std::string::npos;
        std::lock_guard lock(mutex);
        samples.push_back({start, rule, r.status, degraded, took});
        if (r.status == 0) return;  // connection lost: would show as a failure below
      }
    });

  // Requests that started and finished within [from, to).
  auto samples_between = [&](clock_type::time_point from, clock_type::time_point to) {
    std::lock_guard lock(mutex);
    std::vector<sample> out;
    for (const auto& s : samples)
      if (s.at >= from && s.at + s.took < to) out.push_back(s);
    return out;
  };

  std::this_thread::sleep_for(300ms);
  const auto killed_at = clock_type::now();
  redis.kill();
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(http_request_once(fg->port(), "GET", "/readyz").status, 503);
  const auto restarted_at = clock_type::now();
  redis.restart();

  // Back to normal decisions once the backend reconnects (backoff is at most 1 s).
  clock_type::time_point ready_at{};
  for (auto deadline = clock_type::now() + 5s; clock_type::now() < deadline;) {
    if (http_request_once(fg->port(), "GET", "/readyz").status == 200) {
      ready_at = clock_type::now();
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(ready_at, clock_type::time_point{}) << "the backend never became ready again";
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& t : load) t.join();

  // Before: normal decisions.
  const auto before = samples_between(killed_at - 300ms, killed_at);
  ASSERT_FALSE(before.empty());
  for (const auto& s : before) {
    EXPECT_EQ(s.status, 200) << s.rule;
    EXPECT_FALSE(s.degraded);
  }

  // During the outage (after a moment to notice): open → 200 degraded, closed → 503, and
  // every answer within the deadline (50 ms per call; generous slack for a loaded machine).
  const auto during = samples_between(killed_at + 150ms, restarted_at);
  ASSERT_FALSE(during.empty());
  int open_seen = 0, closed_seen = 0;
  for (const auto& s : during) {
    if (s.rule == "open") {
      ++open_seen;
      EXPECT_EQ(s.status, 200);
      EXPECT_TRUE(s.degraded);
    } else {
      ++closed_seen;
      EXPECT_EQ(s.status, 503);
    }
    EXPECT_LT(s.took, 500ms);
  }
  EXPECT_GT(open_seen, 0);
  EXPECT_GT(closed_seen, 0);

  // After: normal again.
  const auto after = samples_between(ready_at + 100ms, clock_type::now());
  ASSERT_FALSE(after.empty());
  for (const auto& s : after) {
    EXPECT_EQ(s.status, 200)
        << s.rule << " at +"
        << std::chrono::duration_cast<std::chrono::milliseconds>(s.at - ready_at).count()
        << " ms after ready";
    EXPECT_FALSE(s.degraded);
  }

  // /metrics counted what the clients saw: every degraded answer above as degraded (and no
  // fail-open answer as failed), every fail-closed one as failed, and the cause.
  const auto metrics = http_request_once(fg->port(), "GET", "/metrics").body;
  const auto value = [&](std::string_view series) {
    const auto v = metric_value(metrics, series);
    EXPECT_TRUE(v) << series << " is missing from /metrics:\n" << metrics;
    return v.value_or(-1);
  };
  EXPECT_GE(value(R"(floodgate_decisions_total{rule="open",result="degraded"})"), open_seen);
  EXPECT_EQ(value(R"(floodgate_decisions_total{rule="open",result="failed"})"), 0);
  EXPECT_GE(value(R"(floodgate_decisions_total{rule="closed",result="failed"})"), closed_seen);
  EXPECT_EQ(value(R"(floodgate_decisions_total{rule="closed",result="degraded"})"), 0);
  EXPECT_GT(value(R"(floodgate_backend_errors_total{kind="not_connected"})"), 0);
}

// SIGTERM while a request waits on a stalled Redis: the request still gets its answer, then
// floodgated exits 0.
TEST(redis, sigterm_lets_a_request_waiting_on_the_backend_finish) {
  redis_server redis;
  START_ON_REDIS(fg,
                "rules:\n  - {name: open, algorithm: gcra, limit: 100, window: 1s, "
                "failure_mode: open}\n",
                redis.url());
  http_connection c(fg->port());
  ASSERT_EQ(c.request("POST", "/v1/check", check_body("open", "k")).status, 200);
  redis.pause();  // connected, silent: calls wait for their deadline
  const auto body = check_body("open", "k");
  ASSERT_TRUE(c.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  std::this_thread::sleep_for(10ms);
  fg->signal(SIGTERM);
  const auto r = c.read_reply();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"degraded\":true"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("Connection").value_or(""), "close");
  EXPECT_EQ(fg->wait_exit(5s), 0);
  redis.resume();
}

// After Redis denies a key, the same check is denied in floodgated itself until its
// retry_after, without a Redis call: Redis sees the first denial only, and /metrics counts the
// others.
TEST(redis, repeated_denials_are_answered_locally_and_counted) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: tight, algorithm: fixed_window, limit: 2, window: 1h}
)";
  START_ON_REDIS(fg, rules, redis.url());
  redis.command({"CONFIG", "RESETSTAT"});
  http_connection c(fg->port());
  std::vector<int> statuses;
  for (int i = 0; i < 10; ++i)
    statuses.push_back(c.request("POST", "/v1/check", check_body("tight", "k")).status);
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 429, 429, 429, 429, 429, 429, 429, 429}));
  const long long calls = script_calls(redis);
  const auto metrics = http_request_once(fg->port(), "GET", "/metrics").body;
  const auto local_found = metric_value(metrics, "floodgate_local_denials_total");
  ASSERT_TRUE(local_found) << metrics;
  const auto local = static_cast<long long>(*local_found);
  // Each denial was either Redis's or local, never both; the cap (1 s) could only make more
  // of them Redis's on a stalled machine.
  EXPECT_EQ(calls + local, 10);
  EXPECT_GE(local, 5);
}

// A rule with reserve: /v1/check (a one-item check_all inside) answers most checks from
// units floodgated reserved, and the window still admits exactly its limit. Before the
// reservations reached one-item check_alls, every check was a script call.
TEST(redis, reserve_in_the_rules_file_answers_from_reserved_units) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: hot, algorithm: fixed_window, limit: 300, window: 1h, reserve: 50}
)";
  START_ON_REDIS(fg, rules, redis.url());
  redis.command({"CONFIG", "RESETSTAT"});
  http_connection c(fg->port());
  int allowed = 0, denied = 0;
  for (int i = 0; i < 400; ++i) {
    const int status = c.request("POST", "/v1/check", check_body("hot", "k")).status;
    allowed += status == 200;
    denied += status == 429;
  }
  EXPECT_EQ(allowed, 300);
  EXPECT_EQ(denied, 100);
  EXPECT_LT(script_calls(redis), 60) << "checks answered from reservations make no call";
  const auto metrics = http_request_once(fg->port(), "GET", "/metrics").body;
  const auto taken = metric_value(metrics, "floodgate_reservations_total");
  const auto units = metric_value(metrics, "floodgate_reserved_units_total");
  const auto spent = metric_value(metrics, "floodgate_reserved_decisions_total");
  ASSERT_TRUE(taken && units && spent) << metrics;
  EXPECT_GE(*taken, 1);
  EXPECT_LE(*units, 300) << "never more than the window had";
  EXPECT_GE(*spent, 240) << "most admissions spent reserved units";
  EXPECT_LE(*spent, 300);
}

// A rule with block_for: refused once, refused for the whole block though the window admits
// again, with Retry-After telling when (docs/algorithms.md, "Penalties"); the block is a key
// of its own in Redis.
TEST(redis, block_for_in_the_rules_file_refuses_for_the_whole_block) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: login, algorithm: fixed_window, limit: 1, window: 1s, block_for: 1h}
)";
  START_ON_REDIS(fg, rules, redis.url());
  http_connection c(fg->port());
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("login", "mallory")).status, 200);
  const auto refused = c.request("POST", "/v1/check", check_body("login", "mallory"));
  ASSERT_EQ(refused.status, 429);
  const auto body = json::parse(refused.body).as_object();
  // Decided within the call: at most the call's duration (a second, generously) below 1 h.
  EXPECT_LE(body.at("retry_after_ms").as_int64(), 3'600'000) << refused.body;
  EXPECT_GT(body.at("retry_after_ms").as_int64(), 3'599'000) << refused.body;
  EXPECT_EQ(refused.header("Retry-After").value_or(""), "3600");
  EXPECT_EQ(redis.command({"EXISTS", "floodgate:login:bk:{mallory}"}).integer, 1);
  // The 1 s window admits again after 1.1 s (local denials last at most 1 s); the block not.
  std::this_thread::sleep_for(1100ms);
  const auto still = c.request("POST", "/v1/check", check_body("login", "mallory"));
  EXPECT_EQ(still.status, 429) << still.body;
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("login", "alice")).status, 200);
}

// POST /v1/refund through floodgated on Redis: a refunded unit is admitted again, never more
// than the limit, and bad refunds are 400 and change nothing.
TEST(redis, refund_gives_back_a_unit_over_http) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: upstream, algorithm: sliding_log, limit: 2, window: 1h}
)";
  START_ON_REDIS(fg, rules, redis.url());
  http_connection c(fg->port());
  const auto check = check_body("upstream", "svc");
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429);
  for (const char* bad : {R"({"rule":"upstream","key":"svc","cost":0})",
                          R"({"rule":"upstream","key":"svc","cost":3})",
                          R"({"rule":"nope","key":"svc"})", R"({"rule":"upstream"})", "{"})
    EXPECT_EQ(c.request("POST", "/v1/refund", bad).status, 400) << bad;
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429) << "a bad refund gave back";
  const auto refunded = c.request("POST", "/v1/refund", check);
  ASSERT_EQ(refunded.status, 200) << refunded.body;
  const auto body = json::parse(refunded.body).as_object();
  EXPECT_EQ(body.at("refunded").as_int64(), 1);
  EXPECT_EQ(body.at("remaining").as_int64(), 1);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200) << "the refunded unit";
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429);
  // Refunding more than was consumed never makes more than the limit available.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.request("POST", "/v1/refund", check).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check_body("upstream", "svc")).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429);

  // /metrics: the four refunds made, three of which gave back (the last found nothing left to
  // give); the five bad ones were refused while parsing (cost 3 > the capacity 2 too), so they
  // are 400s of floodgate_http_responses_total only.
  const auto metrics = c.request("GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result="refunded"})"),
            3)
      << metrics;
  EXPECT_EQ(metric_value(metrics,
                         R"(floodgate_refunds_total{rule="upstream",result="nothing_to_refund"})"),
            1);
  EXPECT_EQ(metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result="failed"})"),
            0);
  EXPECT_EQ(metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result="invalid"})"),
            0);
  EXPECT_EQ(metric_value(metrics, R"(floodgate_cost_refunded_total{rule="upstream"})"), 3);
  // A refund is no decision: the checks alone are counted as decisions.
  EXPECT_EQ(metric_value(metrics, R"(floodgate_decisions_total{rule="upstream",result="allowed"})"),
            5);
}

// A concurrency rule through floodgated on Redis: at most the limit held, a release frees
// one slot, a second release and a made-up lease free nothing.
TEST(redis, acquire_and_release_over_http) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: exports, algorithm: concurrency, limit: 2, lease: 1h}
)";
  START_ON_REDIS(fg, rules, redis.url());
  http_connection c(fg->port());
  const std::string acquire = R"({"rule":"exports","key":"acme"})";
  auto lease_of = [](const http_reply& r) {
    return std::string(json::parse(r.body).as_object().at("lease").as_string());
  };
  const auto a = c.request("POST", "/v1/acquire", acquire);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(c.request("POST", "/v1/acquire", acquire).status, 200);
  const auto full = c.request("POST", "/v1/acquire", acquire);
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(redis.command({"ZCARD", "floodgate:exports:cc:{acme}"}).integer, 2);
  const auto release = R"({"rule":"exports","key":"acme","lease":")" + lease_of(a) + "\"}";
  auto released = [&](const std::string& body) {
    const auto r = c.request("POST", "/v1/release", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body).as_object().at("released").as_bool();
  };
  EXPECT_FALSE(released(R"({"rule":"exports","key":"acme","lease":"not-a-lease"})"));
  EXPECT_TRUE(released(release));
  EXPECT_FALSE(released(release)) << "released twice";
  const auto b = c.request("POST", "/v1/acquire", acquire);
  EXPECT_EQ(b.status, 200) << "the released slot";
  EXPECT_EQ(c.request("POST", "/v1/acquire", acquire).status, 429);
  const auto renew = c.request("POST", "/v1/renew",
                               R"({"rule":"exports","key":"acme","lease":")" + lease_of(b) + "\"}");
  EXPECT_EQ(renew.status, 200);
  EXPECT_TRUE(json::parse(renew.body).as_object().at("renewed").as_bool());
  EXPECT_EQ(c.request("POST", "/v1/check", acquire).status, 400);

  // /metrics counted each call by operation and outcome: 3 granted and 2 refused acquires,
  // 1 release that freed a slot and 2 that found nothing, 1 renewal.
  const auto metrics = c.request("GET", "/metrics").body;
  auto count = [&](std::string_view op, std::string_view outcome) {
    return metric_value(metrics, R"(floodgate_lease_operations_total{rule="exports",operation=")" +
                                     std::string(op) + R"(",outcome=")" + std::string(outcome) +
                                     R"("})");
  };
  EXPECT_EQ(count("acquire", "granted"), 3) << metrics;
  EXPECT_EQ(count("acquire", "refused"), 2);
  EXPECT_EQ(count("acquire", "failed"), 0);
  EXPECT_EQ(count("release", "released"), 1);
  EXPECT_EQ(count("release", "not_held"), 2);
  EXPECT_EQ(count("renew", "renewed"), 1);
  EXPECT_EQ(count("renew", "not_held"), 0);
  EXPECT_EQ(count("release", "granted"), std::nullopt) << "an outcome release cannot have";
  // Lease calls are not rate decisions.
  EXPECT_EQ(metric_value(metrics, R"(floodgate_decisions_total{rule="exports",result="allowed"})"),
            std::nullopt);
}

// Issue 28, item 6, replayed: CLIENT PAUSE WRITE outlasts the acquire's deadline, so
// /v1/acquire on a limit-1 rule answers 503 while Redis, once the pause ends, runs the script
// and takes the only slot under an id nobody was told. floodgated releases that id once Redis
// answers: the slot is free again within seconds, not after the 10-minute lease (before: 429
// for 10 minutes).
TEST(redis, an_acquire_that_timed_out_gives_its_slot_back) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: exports, algorithm: concurrency, limit: 1, lease: 10m}
)";
  START_ON_REDIS(fg, rules, redis.url());  // the default 50 ms deadline
  http_connection c(fg->port());
  const std::string acquire = R"({"rule":"exports","key":"acme"})";
  const std::string set = "floodgate:exports:cc:{acme}";
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", "300", "WRITE"}).str, "OK");
  const auto failed = c.request("POST", "/v1/acquire", acquire);
  EXPECT_EQ(failed.status, 503) << failed.body;
  EXPECT_NE(failed.body.find("released once the backend answers"), std::string::npos)
      << failed.body;
  // A write waits behind the paused script: when it answers, the script has run.
  redis.command({"SET", "barrier", "1"});
  // The semaphore trusts a "not held" only 1 s after the failure, and retries with backoff
  // up to 2 s: 10 s is far above both, and far below the lease.
  const auto until = clock_type::now() + 10s;
  while (redis.command({"ZCARD", set}).integer != 0 && clock_type::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(redis.command({"ZCARD", set}).integer, 0) << "the 503's acquire still holds the slot";
  const auto again = c.request("POST", "/v1/acquire", acquire);
  EXPECT_EQ(again.status, 200) << again.body;
}

// Issue 28, item 7, replayed: a refund whose call timed out (CLIENT PAUSE WRITE outlasting the
// 50 ms deadline) was answered "nothing was refunded" and counted as failed while Redis made
// it once the pause ended. Now it is "outcome unknown", counted as such, and a retry under the
// same Idempotency-Key gives back nothing more: exactly one unit comes back.
TEST(redis, a_refund_that_timed_out_is_unknown_and_its_retry_gives_back_once) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: upstream, algorithm: sliding_log, limit: 3, window: 1h}
)";
  START_ON_REDIS(fg, rules, redis.url());
  http_connection c(fg->port());
  const auto check = check_body("upstream", "svc");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c.request("POST", "/v1/check", check).status, 200);
  const std::vector<std::pair<std::string, std::string>> once = {{"Idempotency-Key", "req-42"}};
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", "300", "WRITE"}).str, "OK");
  const auto unknown = c.request("POST", "/v1/refund", check, once);
  EXPECT_EQ(unknown.status, 503) << unknown.body;
  EXPECT_EQ(json::parse(unknown.body).as_object().at("outcome").as_string(), "unknown")
      << unknown.body;
  redis.command({"SET", "barrier", "1"});  // answers once the paused refund has run
  const auto peek = c.request("POST", "/v1/check", R"({"rule":"upstream","key":"svc","cost":0})");
  EXPECT_EQ(json::parse(peek.body).as_object().at("remaining").as_int64(), 1)
      << "the refund answered 503 was made: " << peek.body;
  const auto retried = c.request("POST", "/v1/refund", check, once);
  ASSERT_EQ(retried.status, 200) << retried.body;
  const auto retried_body = json::parse(retried.body).as_object();
  EXPECT_EQ(retried_body.at("remaining").as_int64(), 1) << "the retry gave back again";
  EXPECT_EQ(retried_body.at("outcome").as_string(), "replayed") << retried.body;
  EXPECT_EQ(retried_body.at("refunded").as_int64(), 1) << "what the timed-out refund gave back";
  const auto marker = redis.command({"PTTL", "floodgate:upstream:sl:{svc}:rf:req-42"}).integer;
  EXPECT_GT(marker, 3'500'000) << "kept for the rule's window (1h)";
  EXPECT_LE(marker, 3'600'000);
  // Another key is another refund; a malformed key is refused and gives back nothing.
  const auto other = c.request("POST", "/v1/refund", check, {{"Idempotency-Key", "req-43"}});
  EXPECT_EQ(json::parse(other.body).as_object().at("remaining").as_int64(), 2) << other.body;
  EXPECT_EQ(c.request("POST", "/v1/refund", check, {{"Idempotency-Key", "a b"}}).status, 400);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 200);
  EXPECT_EQ(c.request("POST", "/v1/check", check).status, 429);
  const auto metrics = c.request("GET", "/metrics").body;
  EXPECT_EQ(metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result="unknown"})"),
            1)
      << metrics;
  EXPECT_EQ(metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result="failed"})"),
            0);
  EXPECT_EQ(metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result="refunded"})"),
            1);
  EXPECT_EQ(metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result="replayed"})"),
            1);
}

// A refund says what it gave back (issue 28, item 10's "a refund of a never-consumed key says
// refunded"): nothing for a key that consumed nothing (it said "refunded": the cost asked), what
// the state held when that is less than the cost, and a retry under its Idempotency-Key repeats
// the first answer, marked replayed, without giving back again. The metrics count what came back.
TEST(redis, a_refund_says_how_much_it_gave_back_over_http) {
  redis_server redis;
  const std::string rules = R"(rules:
  - {name: upstream, algorithm: sliding_log, limit: 5, window: 1h}
)";
  START_ON_REDIS(fg, rules, redis.url());
  http_connection c(fg->port());
  auto refund = [&](std::string_view body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    const auto res = c.request("POST", "/v1/refund", body, headers);
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body).as_object();
  };
  auto text = [](const json::object& o, std::string_view field) {
    const auto* v = o.if_contains(field);
    return v && v->is_string() ? std::string(v->as_string()) : std::string("(none)");
  };
  const auto never = refund(R"({"rule":"upstream","key":"svc","cost":2})");
  EXPECT_EQ(never.at("refunded").as_int64(), 0) << "a key that consumed nothing";
  EXPECT_EQ(text(never, "outcome"), "nothing_to_refund");
  EXPECT_EQ(never.at("remaining").as_int64(), 5);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", check_body("upstream", "svc")).status, 200);
  const auto two = refund(R"({"rule":"upstream","key":"svc","cost":2})");
  EXPECT_EQ(two.at("refunded").as_int64(), 2);
  EXPECT_EQ(text(two, "outcome"), "refunded");
  EXPECT_EQ(two.at("remaining").as_int64(), 4);
  const std::vector<std::pair<std::string, std::string>> once = {{"Idempotency-Key", "req-7"}};
  const auto part = refund(R"({"rule":"upstream","key":"svc","cost":4})", once);
  EXPECT_EQ(part.at("refunded").as_int64(), 1) << "only 1 was still consumed";
  EXPECT_EQ(part.at("remaining").as_int64(), 5);
  const auto replay = refund(R"({"rule":"upstream","key":"svc","cost":4})", once);
  EXPECT_EQ(replay.at("refunded").as_int64(), 1) << "the first answer, repeated";
  EXPECT_EQ(text(replay, "outcome"), "replayed");
  EXPECT_EQ(replay.at("remaining").as_int64(), 5);
  const auto metrics = c.request("GET", "/metrics").body;
  auto count = [&](std::string_view result) {
    return metric_value(metrics, R"(floodgate_refunds_total{rule="upstream",result=")" +
                                     std::string(result) + "\"}")
        .value_or(-1);
  };
  EXPECT_EQ(count("refunded"), 2) << metrics;
  EXPECT_EQ(count("nothing_to_refund"), 1);
  EXPECT_EQ(count("replayed"), 1);
  EXPECT_EQ(metric_value(metrics, R"(floodgate_cost_refunded_total{rule="upstream"})"), 3)
      << "what came back, not what was asked";
}

}  // namespace
}  // namespace floodgate::test
