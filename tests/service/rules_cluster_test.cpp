// floodgated --rules-from and floodgate rules on a real local Redis Cluster and Sentinel: the
// document's keys share a slot (one hash tag), the push script runs on that slot's master
// (reached by MOVED from any seed) or on the primary the sentinels name, and a failover leaves
// no instance stuck: the next push, on the new master or primary, reaches every instance. A
// run-time override set through either applies too (floodgate override set, list).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

struct cli_out {
  int exit_code = -1;
  std::string output;
};

cli_out cli(const std::vector<std::string>& args, const std::string& dir) {
  std::vector<std::string> argv = {FLOODGATE_CLI_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto out = dir + "/cli.log";
  child_process p(argv, {.output = out});
  cli_out r;
  // Each Redis answer within 2 s (the CLI's deadline); a few of them, MOVED included.
  r.exit_code = p.wait_exit(60s).value_or(-1);
  r.output = read_file(out);
  return r;
}

long long limit_of(const floodgated_process& fg) {
  static int n = 0;
  const auto r = http_request_once(fg.port(), "POST", "/v1/check",
                                   R"({"rule":"api","key":"probe-)" + std::to_string(++n) + "\"}");
  if (r.status != 200) return -1;
  return json::parse(r.body).as_object().at("limit").as_int64();
}

std::string rules_with_limit(int limit) {
  return "rules:\n  - name: api\n    algorithm: gcra\n    limit: " + std::to_string(limit) +
         "\n    window: 60s\n";
}

TEST(rules_cluster, a_push_reaches_every_instance_also_after_a_failover) {
  redis_cluster cluster;
  const auto dir = make_temp_dir("rules-cluster-");
  const auto file = dir + "/rules.yaml";
  const auto ref = cluster.url() + "#prod";
  auto push = [&](int limit, const std::vector<std::string>& more) {
    std::ofstream(file, std::ios::trunc) << rules_with_limit(limit);
    std::vector<std::string> args = {"rules", "push", file, "--to", ref};
    args.insert(args.end(), more.begin(), more.end());
    return cli(args, dir);
  };
  auto r = push(5, {});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The three keys in one slot, on its master.
  const int slot = cluster.slot_of("floodgate:rules:{prod}:head");
  EXPECT_EQ(cluster.slot_of("floodgate:rules:{prod}:versions"), slot);
  EXPECT_EQ(cluster.slot_of("floodgate:rules:{prod}:history"), slot);
  const int master = cluster.master_of(slot);
  ASSERT_GE(master, 0);
  EXPECT_EQ(cluster.node(master).command({"HGET", "floodgate:rules:{prod}:head", "version"}).str,
            "1");

  floodgated_process::options o;
  o.rules_file = false;
  o.extra_args = {"--rules-from", ref};
  std::vector<std::unique_ptr<floodgated_process>> fleet;
  for (int k = 0; k < 2; ++k) fleet.push_back(std::make_unique<floodgated_process>("", o));
  for (const auto& fg : fleet) ASSERT_EQ(limit_of(*fg), 5) << fg->log();

  r = push(7, {"--base", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 1 s is the promise (rules_watch.hpp); 10 s only to report how late rather than hang.
  for (const auto& fg : fleet)
    EXPECT_TRUE(wait_for([&] { return limit_of(*fg) == 7; }, 10s)) << fg->log();

  // The slot's master dies; once a replica has taken over, the next push lands there and
  // reaches every instance: none is stuck on the old master.
  cluster.node(master).kill();
  ASSERT_GE(cluster.wait_master_for(slot, master, 30s), 0);
  // The replica has version 2 (replicated before the kill, or the push retried is refused
  // with the version in force named): push from whatever is in force.
  ASSERT_TRUE(wait_for([&] { return push(9, {"--force"}).exit_code == 0; }, 30s));
  for (const auto& fg : fleet)
    EXPECT_TRUE(wait_for([&] { return limit_of(*fg) == 9; }, 10s)) << fg->log();
  std::filesystem::remove_all(dir);
}

TEST(rules_sentinel, a_push_reaches_every_instance_also_after_a_failover) {
  redis_sentinel sentinel;
  const auto dir = make_temp_dir("rules-sentinel-");
  const auto file = dir + "/rules.yaml";
  const auto ref = sentinel.url() + "#prod";
  auto push = [&](int limit, const std::vector<std::string>& more) {
    std::ofstream(file, std::ios::trunc) << rules_with_limit(limit);
    std::vector<std::string> args = {"rules", "push", file, "--to", ref};
    args.insert(args.end(), more.begin(), more.end());
    return cli(args, dir);
  };
  auto r = push(5, {});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  floodgated_process::options o;
  o.rules_file = false;
  o.extra_args = {"--rules-from", ref};
  std::vector<std::unique_ptr<floodgated_process>> fleet;
  for (int k = 0; k < 2; ++k) fleet.push_back(std::make_unique<floodgated_process>("", o));
  for (const auto& fg : fleet) ASSERT_EQ(limit_of(*fg), 5) << fg->log();
  r = push(7, {"--base", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& fg : fleet)
    EXPECT_TRUE(wait_for([&] { return limit_of(*fg) == 7; }, 10s)) << fg->log();

  sentinel.failover();
  ASSERT_TRUE(sentinel.wait_primary_port(sentinel.node(1).port(), 30s));
  // Version 2 was replicated before the failover: a push based on it lands on the new primary
  // (the sentinels may name the old one for a moment: READONLY, so tried again).
  ASSERT_TRUE(wait_for([&] { return push(9, {"--base", "2"}).exit_code == 0; }, 30s));
  for (const auto& fg : fleet)
    EXPECT_TRUE(wait_for([&] { return limit_of(*fg) == 9; }, 10s)) << fg->log();
  std::filesystem::remove_all(dir);
}

// The limit `key` gets under rule api (429 too: polling uses a key's count up).
long long limit_for(const floodgated_process& fg, const std::string& key) {
  const auto r =
      http_request_once(fg.port(), "POST", "/v1/check", R"({"rule":"api","key":")" + key + "\"}");
  if (r.status != 200 && r.status != 429) return -1;
  return json::parse(r.body).as_object().at("limit").as_int64();
}

// Rules pushed and a run-time override set through `ref` (a Cluster or Sentinel URL) reach an
// instance reading its rules there, and `floodgate override list` reads it back.
void an_override_set_through(const std::string& ref, const std::string& dir) {
  const auto file = dir + "/rules.yaml";
  std::ofstream(file, std::ios::trunc) << rules_with_limit(5);
  auto r = cli({"rules", "push", file, "--to", ref}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  floodgated_process::options o;
  o.rules_file = false;
  o.extra_args = {"--rules-from", ref};
  floodgated_process fg("", o);
  ASSERT_EQ(limit_for(fg, "vip"), 5) << fg.log();
  r = cli({"override", "set", ref, "api", "vip", "--limit", "50", "--for", "1h"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 1 s is the promise (overrides_watch.hpp); 10 s only to report how late rather than hang.
  EXPECT_TRUE(wait_for([&] { return limit_for(fg, "vip") == 50; }, 10s)) << fg.log();
  EXPECT_EQ(limit_for(fg, "other"), 5);
  r = cli({"override", "list", ref}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("api key 'vip' limit=50  "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("NOT IN FORCE"), std::string::npos) << r.output;
}

TEST(rules_cluster, an_override_set_through_the_cluster_applies) {
  redis_cluster cluster;
  const auto dir = make_temp_dir("overrides-cluster-");
  an_override_set_through(cluster.url() + "#prod", dir);
  // Beside the document, in its slot: one script changes both.
  EXPECT_EQ(cluster.slot_of("floodgate:rules:{prod}:overrides"),
            cluster.slot_of("floodgate:rules:{prod}:head"));
  std::filesystem::remove_all(dir);
}

TEST(rules_sentinel, an_override_set_through_sentinel_applies) {
  redis_sentinel sentinel;
  const auto dir = make_temp_dir("overrides-sentinel-");
  an_override_set_through(sentinel.url() + "#prod", dir);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floodgate::test
