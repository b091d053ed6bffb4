// floodgate override set|list|remove and floodgated --rules-from's run-time overrides, against a
// real redis-server: a set reaches two instances within 1 s and only the key it names, a prefix
// entry, list, remove, the end of an entry at its expiry with no Redis event, a rules push that
// rebuilds one entry and drops another, and input the CLI refuses.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "admin_port.hpp"
#include "child_process.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "inspect_helpers.hpp"
#include "metrics_text.hpp"
#include "real_clock_window.hpp"
#include "redis_server.hpp"
#include "reservation_state.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;
using clock = std::chrono::steady_clock;

// overrides_watch.hpp: told by the PUBLISH at once, else a read every 500 ms (200 ms while
// unsubscribed); the issue's bound is 1 s.
constexpr auto apply_bound = 1000ms;
constexpr auto give_up_after = 10s;

const std::string fixed_rules =
    "rules:\n  - name: api\n    algorithm: fixed_window\n    limit: 5\n    window: 60s\n";

struct instance {
  std::unique_ptr<floodgated_process> fg;
  std::uint16_t admin = 0;
};

instance start_instance(const std::string& ref, const std::vector<std::string>& more = {}) {
  floodgated_process::options o;
  o.rules_file = false;
  o.extra_args = {"--rules-from", ref, "--admin-listen", "127.0.0.1:0"};
  o.extra_args.insert(o.extra_args.end(), more.begin(), more.end());
  instance i;
  i.fg = std::make_unique<floodgated_process>("", o);
  i.admin = admin_port_of(*i.fg);
  return i;
}

// The limit `key` gets under rule api on this instance now (the memory backend: one check).
long long limit_for(const instance& i, const std::string& key) {
  const auto r = http_request_once(i.fg->port(), "POST", "/v1/check",
                                   R"({"rule":"api","key":")" + key + "\"}");
  // 429 too: polling uses a key's count up, and the limit is what is asked.
  if (r.status != 200 && r.status != 429) return -1;
  return json::parse(r.body).as_object().at("limit").as_int64();
}

// wait_for at a pace of 20 ms: each poll is a check, and the bounds are hundreds of ms.
template <class F>
bool poll_until(F done, std::chrono::milliseconds limit) {
  return wait_for(
      [&] {
        if (done()) return true;
        std::this_thread::sleep_for(20ms);
        return false;
      },
      limit);
}

json::object rules_source(const instance& i) {
  const auto r = http_request_once(i.admin, "GET", "/v1/status");
  return json::parse(r.body).as_object().at("rules_source").as_object();
}

cli_result cli(std::vector<std::string> args) {
  return run_floodgate_cli(args);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Where the instances decide: each on its own memory, or on the rules' Redis.
enum class backend { memory, redis };

struct fleet_on_redis {
  explicit fleet_on_redis(const std::string& rules, int instances = 2,
                          backend where = backend::memory)
      : ref(redis.url() + "#prod"), file(rules) {
    const auto pushed = cli({"rules", "push", file.path, "--to", ref});
    if (pushed.exit_code != 0) throw std::runtime_error(pushed.output);
    std::vector<std::string> more;
    if (where == backend::redis) more = {"--redis", redis.url() + "?timeout=2s"};
    for (int k = 0; k < instances; ++k) fleet.push_back(start_instance(ref, more));
    for (const auto& i : fleet)
      if (!wait_for([&] { return rules_source(i).at("subscribed").as_bool(); }, give_up_after))
        throw std::runtime_error("not subscribed: " + i.fg->log());
  }
  redis_server redis;
  std::string ref;
  temp_rules_file file;
  std::vector<instance> fleet;
};

TEST(override_redis, a_set_raises_one_key_on_two_instances_within_a_second_then_ends_by_itself) {
  fleet_on_redis f(fixed_rules);
  for (const auto& i : f.fleet) ASSERT_EQ(limit_for(i, "vip"), 5) << i.fg->log();

  constexpr auto lasts = 3s;  // long enough to look at it before it ends
  const auto started = clock::now();
  const auto set = cli({"override", "set", f.ref, "api", "vip", "--limit", "50", "--for", "3s"});
  const auto set_done = clock::now();
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_TRUE(contains(set.output, "set api key 'vip' limit=50 for 3.0s")) << set.output;
  for (const auto& i : f.fleet) {
    ASSERT_TRUE(poll_until([&] { return limit_for(i, "vip") == 50; }, give_up_after))
        << i.fg->log();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started);
    EXPECT_LT(took, apply_bound) << "applied after " << took.count() << " ms";
    EXPECT_EQ(limit_for(i, "other"), 5);  // only the key it names
    EXPECT_EQ(limit_for(i, "vip2"), 5);
  }
  const auto listed = cli({"override", "list", f.ref});
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_TRUE(contains(listed.output, "api key 'vip' limit=50  ")) << listed.output;
  EXPECT_TRUE(contains(listed.output, "s left  (by ")) << listed.output;
  for (const auto& i : f.fleet) {
    EXPECT_EQ(rules_source(i).at("runtime_overrides").as_int64(), 1);
    const auto m = http_request_once(i.admin, "GET", "/metrics").body;
    EXPECT_EQ(metric_value(m, "floodgate_runtime_overrides{source=\"" + f.ref + "\"}"), 1.0) << m;
  }

  // It ends at its expiry by itself: nothing is written to Redis then, each instance's table
  // passes it over from that moment.
  for (const auto& i : f.fleet)
    ASSERT_TRUE(poll_until([&] { return limit_for(i, "vip") == 5; }, lasts + give_up_after))
        << i.fg->log();
  const auto ended = clock::now();
  EXPECT_GE(ended - started, lasts - 100ms);  // not before (100 ms: clocks' rounding)
  EXPECT_LT(ended - set_done, lasts + 500ms) << "ended late";
  for (const auto& i : f.fleet) EXPECT_EQ(rules_source(i).at("runtime_overrides").as_int64(), 0);
  const auto after = cli({"override", "list", f.ref});
  EXPECT_TRUE(contains(after.output, "no run-time overrides in")) << after.output;
}

TEST(override_redis, a_prefix_entry_until_removed) {
  fleet_on_redis f(fixed_rules);
  const auto set =
      cli({"override", "set", f.ref, "api", "free:", "--prefix", "--limit", "2", "--for", "1h"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  for (const auto& i : f.fleet) {
    ASSERT_TRUE(poll_until([&] { return limit_for(i, "free:42") == 2; }, apply_bound))
        << i.fg->log();
    EXPECT_EQ(limit_for(i, "free:"), 2);
    EXPECT_EQ(limit_for(i, "freebie"), 5);
  }
  const auto listed = cli({"override", "list", f.ref});
  EXPECT_TRUE(contains(listed.output, "api prefix 'free:' limit=2  59m5")) << listed.output;

  const auto removed = cli({"override", "remove", f.ref, "api", "free:", "--prefix"});
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_TRUE(contains(removed.output, "removed api prefix 'free:'")) << removed.output;
  for (const auto& i : f.fleet)
    EXPECT_TRUE(poll_until([&] { return limit_for(i, "free:42") == 5; }, apply_bound))
        << i.fg->log();
  const auto again = cli({"override", "remove", f.ref, "api", "free:", "--prefix"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(contains(again.output, "no run-time override of api prefix 'free:'")) << again.output;
}

TEST(override_redis, a_rules_push_rebuilds_an_entry_that_still_fits_and_drops_one_that_does_not) {
  fleet_on_redis f(
      "rules:\n  - name: api\n    algorithm: token_bucket\n    limit: 5\n"
      "    window: 60s\n");
  ASSERT_EQ(cli({"override", "set", f.ref, "api", "vip", "--limit", "50", "--for", "1h"}).exit_code,
            0);
  const auto burst =
      cli({"override", "set", f.ref, "api", "bursty", "--burst", "20", "--for", "1h"});
  ASSERT_EQ(burst.exit_code, 0) << burst.output;
  for (const auto& i : f.fleet) {
    ASSERT_TRUE(poll_until([&] { return limit_for(i, "vip") == 50; }, apply_bound)) << i.fg->log();
    ASSERT_TRUE(poll_until([&] { return limit_for(i, "bursty") == 20; }, apply_bound))
        << i.fg->log();
  }
  // Version 2: a fixed window, which takes no burst. "vip" (a limit) is rebuilt under it;
  // "bursty" is dropped, and said so.
  temp_rules_file v2(
      "rules:\n  - name: api\n    algorithm: fixed_window\n    limit: 6\n"
      "    window: 60s\n");
  const auto pushed = cli({"rules", "push", v2.path, "--to", f.ref, "--base", "1"});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.output;
  for (const auto& i : f.fleet) {
    ASSERT_TRUE(poll_until([&] { return limit_for(i, "other") == 6; }, apply_bound)) << i.fg->log();
    EXPECT_EQ(limit_for(i, "vip"), 50);
    EXPECT_EQ(limit_for(i, "bursty"), 6);
    EXPECT_TRUE(i.fg->wait_for_log("msg=\"run-time override dropped\" version=2")) << i.fg->log();
    EXPECT_TRUE(i.fg->wait_for_log("burst applies only to token_bucket and gcra")) << i.fg->log();
    EXPECT_EQ(rules_source(i).at("runtime_overrides").as_int64(), 1);
  }
}

TEST(override_redis, the_cli_refuses_what_the_table_would) {
  fleet_on_redis f(fixed_rules);
  const auto unknown =
      cli({"override", "set", f.ref, "nope", "vip", "--limit", "9", "--for", "1h"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_TRUE(contains(unknown.output, "prod@v1: no rule named 'nope'")) << unknown.output;

  const auto no_for = cli({"override", "set", f.ref, "api", "vip", "--limit", "9"});
  EXPECT_EQ(no_for.exit_code, 2);
  EXPECT_TRUE(contains(no_for.output, "set needs --for DURATION")) << no_for.output;

  const auto burst = cli({"override", "set", f.ref, "api", "vip", "--burst", "9", "--for", "1h"});
  EXPECT_EQ(burst.exit_code, 1);
  EXPECT_TRUE(contains(burst.output, "burst applies only to token_bucket and gcra"))
      << burst.output;

  const auto bad_for = cli({"override", "set", f.ref, "api", "vip", "--limit", "9", "--for", "1"});
  EXPECT_EQ(bad_for.exit_code, 2);
  EXPECT_TRUE(contains(bad_for.output, "--for: '1' is not a duration")) << bad_for.output;

  const auto listed = cli({"override", "list", f.ref});
  EXPECT_TRUE(contains(listed.output, "no run-time overrides in")) << listed.output;
  for (const auto& i : f.fleet) EXPECT_EQ(limit_for(i, "vip"), 5);
}

// SIGHUP reads every entry again, as it reads the rules: an entry written without bumping the
// version (by hand, or an older writer) is picked up by it and not before.
TEST(override_redis, sighup_reads_every_entry_again) {
  fleet_on_redis f(fixed_rules);
  const auto time = f.redis.command({"TIME"});
  ASSERT_EQ(time.elements.size(), 2u);
  const auto now_ms = std::stoll(time.elements[0].str) * 1000;
  ASSERT_EQ(f.redis
                .command({"HSET", "floodgate:rules:{prod}:overrides", "api\texact\tvip",
                          "50\t\t\t" + std::to_string(now_ms + 3'600'000) + "\ttest\t" +
                              std::to_string(now_ms)})
                .integer,
            1);
  const auto& i = f.fleet.front();
  // Two version reads (500 ms apart while subscribed) find nothing new.
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(limit_for(i, "vip"), 5);
  i.fg->signal(SIGHUP);
  EXPECT_TRUE(poll_until([&] { return limit_for(i, "vip") == 50; }, apply_bound)) << i.fg->log();
  EXPECT_EQ(limit_for(f.fleet.back(), "vip"), 5);  // not signalled
}

// The store's bound (rules/overrides_store.hpp: 10,000), reached by writing the hash as another
// writer would; an entry already there can still be replaced. And a Redis that is not there is
// said so, with its words.
TEST(override_redis, the_store_refuses_an_entry_beyond_its_bound_and_says_when_redis_fails) {
  redis_server redis;
  const auto ref = redis.url() + "#prod";
  temp_rules_file rules(fixed_rules);
  ASSERT_EQ(cli({"rules", "push", rules.path, "--to", ref}).exit_code, 0);
  std::vector<std::string> fill = {"HSET", "floodgate:rules:{prod}:overrides"};
  for (int k = 0; k < 10'000; ++k) {
    fill.push_back("api\texact\tkey-" + std::to_string(k));
    fill.push_back("50\t\t\t99999999999999\ttest\t0");  // expires in the year 5138
  }
  ASSERT_EQ(redis.command(fill).integer, 10'000);

  const auto full = cli({"override", "set", ref, "api", "vip", "--limit", "9", "--for", "1h"});
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_TRUE(contains(full.output, "holds 10000 run-time overrides, the most it takes (10000)"))
      << full.output;
  const auto replace = cli({"override", "set", ref, "api", "key-7", "--limit", "9", "--for", "1h"});
  EXPECT_EQ(replace.exit_code, 0) << replace.output;

  const auto gone = cli({"override", "list", "redis://127.0.0.1:1#prod"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_TRUE(contains(gone.output, "redis://127.0.0.1:1#prod: cannot read: ")) << gone.output;
}

// --- every path that resolves a key's rule: /v1/inspect, /v1/reset and the CLI's ---

json::object admin_json(const instance& i, const std::string& method, const std::string& target) {
  const auto r = http_request_once(i.admin, method, target);
  EXPECT_EQ(r.status, 200) << target << ": " << r.body;
  return json::parse(r.body).as_object();
}

long long remaining_after_check(const instance& i, const std::string& key) {
  const auto r = http_request_once(i.fg->port(), "POST", "/v1/check",
                                   R"({"rule":"api","key":")" + key + "\"}");
  return json::parse(r.body).as_object().at("remaining").as_int64();
}

TEST(override_redis, inspect_and_reset_act_under_the_override_in_force_and_name_it) {
  fleet_on_redis f(
      "rules:\n  - name: api\n    algorithm: fixed_window\n    limit: 5\n    window: 1h\n"
      "    overrides:\n      - {key: gold, limit: 20}\n",
      1, backend::redis);
  const auto& i = f.fleet.front();
  inside_one_window(1h, 60s);  // the counts below in one fixed window
  const auto set = cli({"override", "set", f.ref, "api", "vip", "--limit", "50", "--for", "1h"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  ASSERT_TRUE(i.fg->wait_for_log("version=1 live=1", give_up_after)) << i.fg->log();
  for (long long left : {49, 48, 47}) ASSERT_EQ(remaining_after_check(i, "vip"), left);

  // The admin listener: the override's policy and state, which override, until when.
  auto o = admin_json(i, "GET", "/v1/inspect?rule=api&key=vip");
  EXPECT_EQ(o.at("limit").as_int64(), 50);
  EXPECT_EQ(o.at("remaining").as_int64(), 47);
  const auto& which = o.at("override").as_object();
  EXPECT_EQ(which.at("source").as_string(), "runtime");
  EXPECT_EQ(which.at("match").as_string(), "vip");
  EXPECT_EQ(which.at("kind").as_string(), "exact");
  EXPECT_GT(which.at("expires_in_ms").as_int64(), 3'500'000);
  EXPECT_LE(which.at("expires_in_ms").as_int64(), 3'600'000);
  EXPECT_GT(which.at("expires_at_ms").as_int64(), 0);
  o = admin_json(i, "GET", "/v1/inspect?rule=api&key=gold");
  EXPECT_EQ(o.at("limit").as_int64(), 20);
  EXPECT_EQ(o.at("override").as_object().at("source").as_string(), "rules");
  EXPECT_FALSE(o.at("override").as_object().contains("expires_at_ms"));
  o = admin_json(i, "GET", "/v1/inspect?rule=api&key=plain");
  EXPECT_EQ(o.at("limit").as_int64(), 5);
  EXPECT_TRUE(o.at("override").is_null());

  // The CLI with --rules-from reads the overrides in force; with --rules FILE it says it does not.
  const auto redis_url = f.redis.url();
  auto r = cli({"inspect", "--redis", redis_url, "--rules-from", f.ref, "api", "vip"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(cli_field(r.output, "override").starts_with("run-time key 'vip', 0h59m")) << r.output;
  EXPECT_EQ(cli_field(r.output, "remaining"), "47 of 50") << r.output;
  EXPECT_TRUE(contains(cli_field(r.output, "rule"), "limit 50 per 3600000 ms")) << r.output;
  r = cli({"inspect", "--redis", redis_url, "--rules", f.file.path, "api", "vip"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_field(r.output, "override"),
            "none (run-time overrides not read: --rules-from URL#NAME reads them)")
      << r.output;
  r = cli({"inspect", "--redis", redis_url, "--rules-from", f.ref, "api", "gold"});
  EXPECT_TRUE(cli_field(r.output, "override").starts_with("static key 'gold'")) << r.output;
  EXPECT_EQ(cli({"inspect", "--redis", redis_url, "--rules", f.file.path, "--rules-from", f.ref,
                 "api", "vip"})
                .exit_code,
            2);

  // Reset under the override: its state, so the next check has all 50 but one.
  r = cli({"reset", "--redis", redis_url, "--rules-from", f.ref, "api", "vip"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "reset: rule api, key vip, override run-time key 'vip'"))
      << r.output;
  EXPECT_EQ(remaining_after_check(i, "vip"), 49);
  o = admin_json(i, "POST", "/v1/reset?rule=api&key=vip");
  EXPECT_EQ(o.at("override").as_object().at("source").as_string(), "runtime");
  EXPECT_EQ(admin_json(i, "GET", "/v1/inspect?rule=api&key=vip").at("remaining").as_int64(), 50);
}

TEST(override_redis, list_marks_entries_not_in_force_and_status_counts_only_live_ones) {
  fleet_on_redis f(
      "rules:\n  - {name: api, algorithm: gcra, limit: 5, window: 1h}\n"
      "  - {name: log, algorithm: sliding_log, limit: 10, window: 1h}\n",
      1);
  const auto& i = f.fleet.front();
  for (const auto& args : std::vector<std::vector<std::string>>{{"api", "vip", "--limit", "50"},
                                                                {"api", "b", "--burst", "3"},
                                                                {"log", "k", "--limit", "9"}}) {
    std::vector<std::string> argv = {"override", "set", f.ref};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--for", "1h"});
    const auto r = cli(argv);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  ASSERT_TRUE(poll_until([&] { return rules_source(i).at("runtime_overrides").as_int64() == 3; },
                         give_up_after))
      << i.fg->log();
  auto listed = cli({"override", "list", f.ref});
  EXPECT_FALSE(contains(listed.output, "NOT IN FORCE")) << listed.output;

  // Version 2: api counts a sliding log (no burst), log is gone.
  temp_rules_file v2("rules:\n  - {name: api, algorithm: sliding_log, limit: 5, window: 1h}\n");
  ASSERT_EQ(cli({"rules", "push", v2.path, "--to", f.ref, "--base", "1"}).exit_code, 0);
  ASSERT_TRUE(poll_until([&] { return rules_source(i).at("runtime_overrides").as_int64() == 1; },
                         give_up_after))
      << i.fg->log();
  listed = cli({"override", "list", f.ref});
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const auto line_of = [&](const std::string& start) {
    const auto at = listed.output.find(start);
    return at == std::string::npos ? std::string()
                                   : listed.output.substr(at, listed.output.find('\n', at) - at);
  };
  EXPECT_FALSE(contains(line_of("api key 'vip'"), "NOT IN FORCE")) << listed.output;
  EXPECT_TRUE(contains(line_of("api key 'vip'"),
                       "(set under v1; rule 'api' changed since: it applies to prod@v2's)"))
      << listed.output;
  EXPECT_TRUE(contains(line_of("api key 'b'"),
                       "NOT IN FORCE under prod@v2: override of rule 'api' key 'b': policy 'api': "
                       "burst applies only to token_bucket and gcra, not sliding_log"))
      << listed.output;
  EXPECT_TRUE(contains(line_of("log key 'k'"), "NOT IN FORCE under prod@v2: no rule named 'log'"))
      << listed.output;
  const auto page = http_request_once(i.admin, "GET", "/metrics").body;
  EXPECT_EQ(metric_value(page, "floodgate_runtime_overrides{source=\"" + f.ref + "\"}"), 1.0);
}

// --- the ACL users docs/operations.md gives (read from it, so they stay true) ---

// Every "ACL SETUSER <user> ..." line of docs/operations.md, split at spaces.
std::vector<std::vector<std::string>> documented_acl(const std::string& user) {
  std::ifstream in(FLOODGATE_SOURCE_DIR "/docs/operations.md");
  std::vector<std::vector<std::string>> out;
  const std::string start = "ACL SETUSER " + user + " ";
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(start)) continue;
    std::vector<std::string> words;
    for (std::istringstream ws(line); ws >> line;) words.push_back(line);
    out.push_back(std::move(words));
  }
  return out;
}

TEST(override_redis, the_documented_acl_users_work_and_a_missing_permission_is_named) {
  redis_server redis;
  for (const char* user : {"floodgate", "floodgate-ops"}) {
    const auto lines = documented_acl(user);
    ASSERT_FALSE(lines.empty()) << "no ACL SETUSER " << user << " line in docs/operations.md";
    for (const auto& l : lines) ASSERT_EQ(redis.command(l).str, "OK") << user;
  }
  const auto at = "@127.0.0.1:" + std::to_string(redis.port());
  const auto ops = "redis://floodgate-ops:s3cret" + at + "#prod";
  temp_rules_file rules(fixed_rules);
  auto r = cli({"rules", "push", rules.path, "--to", ops});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = cli({"override", "set", ops, "api", "vip", "--limit", "50", "--for", "1h"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = cli({"override", "list", ops});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "api key 'vip' limit=50  ")) << r.output;
  // floodgated as the limiter's user, with the rules' permissions added.
  const auto i = start_instance("redis://floodgate:s3cret" + at + "#prod",
                                {"--redis", "redis://floodgate:s3cret" + at + "?timeout=2s"});
  EXPECT_TRUE(poll_until([&] { return limit_for(i, "vip") == 50; }, give_up_after)) << i.fg->log();
  EXPECT_TRUE(poll_until([&] { return rules_source(i).at("subscribed").as_bool(); }, give_up_after))
      << i.fg->log();
  EXPECT_EQ(rules_source(i).at("redis_error").as_string(), "") << i.fg->log();

  // One permission fewer, outside a script (HMGET: Redis's NOPERM words) or in one (PUBLISH:
  // Redis names only the script's line, so the line's command is named too): exit 1.
  ASSERT_EQ(redis.command({"ACL", "SETUSER", "floodgate-ops", "-publish"}).str, "OK");
  r = cli({"override", "set", ops, "api", "k2", "--limit", "9", "--for", "1h"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "cannot set: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "can't run this command")) << r.output;
  EXPECT_TRUE(contains(r.output, ": PUBLISH)")) << r.output;
  ASSERT_EQ(redis.command({"ACL", "SETUSER", "floodgate-ops", "+publish", "-hmget"}).str, "OK");
  r = cli({"override", "set", ops, "api", "k2", "--limit", "9", "--for", "1h"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "cannot read: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "NOPERM")) << r.output;
}

// Issue 27: a run-time override is in force as the rules are; when it changes, what the key
// reserved under the old entry's policy goes back to Redis at once, and what another key holds
// under the rule's own policy stays. Before, the units stayed held until swept.
TEST(override_redis, a_changed_entry_gives_back_what_its_key_reserved) {
  fleet_on_redis f(with_a_window_far_from_its_end(
                       "rules:\n  - {name: api, algorithm: fixed_window, limit: 100, window: 24h, "
                       "reserve: 50, reserve_for: 10m}\n"),
                   1, backend::redis);
  const auto& i = f.fleet[0];
  auto set_vip = [&](const std::string& limit) {
    const auto log_at = i.fg->log().size();
    const auto r = cli({"override", "set", f.ref, "api", "vip", "--limit", limit, "--for", "1h"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_TRUE(i.fg->wait_for_log("run-time overrides applied", give_up_after, log_at))
        << i.fg->log();
  };
  set_vip("80");
  // 8 checks each: grants of 1, 2, 4 and 8, 7 of the last held.
  constexpr int checks = 8;
  for (const std::string key : {"vip", "plain"}) {
    http_connection c(i.fg->port());
    for (int n = 0; n < checks; ++n) {
      const auto r = c.request("POST", "/v1/check", R"({"rule":"api","key":")" + key + "\"}");
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  ASSERT_EQ(limit_for(i, "vip"), 80);  // one more, from the grant
  const auto vip_held = fixed_window_count(f.redis, "floodgate:api:fw:{vip}") - checks - 1;
  const auto plain_count = fixed_window_count(f.redis, "floodgate:api:fw:{plain}");
  ASSERT_GT(vip_held, 0) << "a grant holds units unspent";

  set_vip("90");
  EXPECT_TRUE(
      wait_for([&] { return fixed_window_count(f.redis, "floodgate:api:fw:{vip}") == checks + 1; },
               give_up_after))
      << fixed_window_count(f.redis, "floodgate:api:fw:{vip}");
  EXPECT_TRUE(
      wait_for([&] { return counter_on(i.fg->port(), units_given_back_of("api")) == vip_held; },
               give_up_after))
      << counter_on(i.fg->port(), units_given_back_of("api")) << " given back, held " << vip_held;
  EXPECT_EQ(fixed_window_count(f.redis, "floodgate:api:fw:{plain}"), plain_count);
}

}  // namespace
}  // namespace floodgate::test
