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
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admin_port.hpp"
#include "child_process.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "inspect_helpers.hpp"
#include "metrics_text.hpp"
#include "redis_server.hpp"
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

instance start_instance(const std::string& ref) {
  floodgated_process::options o;
  o.rules_file = false;
  o.extra_args = {"--rules-from", ref, "--admin-listen", "127.0.0.1:0"};
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

struct fleet_on_redis {
  explicit fleet_on_redis(const std::string& rules) : ref(redis.url() + "#prod"), file(rules) {
    const auto pushed = cli({"rules", "push", file.path, "--to", ref});
    if (pushed.exit_code != 0) throw std::runtime_error(pushed.output);
    for (int k = 0; k < 2; ++k) fleet.push_back(start_instance(ref));
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

}  // namespace
}  // namespace floodgate::test
