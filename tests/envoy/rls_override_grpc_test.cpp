// Per-value overrides on Envoy's path: floodgated on a real redis-server, called over gRPC by
// the Node client (@grpc/grpc-js, as Envoy's wire format). A descriptor's value is the key an
// override names: the exact value, else the longest prefix, decides its counter and the
// current_limit reported; a changed override is a reload of the rule for that value.
#include <gtest/gtest.h>
#include <signal.h>

#include "real_clock_window.hpp"
#include "redis_server.hpp"
#include "rls_process.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::string config_with(const std::string& overrides) {
  return "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n"
         "      unit: hour\n      requests_per_unit: 2\n      overrides:\n" +
         overrides;
}

void reload(rls_process& p, const std::string& yaml) {
  write_file(p.config_path(), yaml);
  const auto from = p.fg().log().size();
  p.fg().signal(SIGHUP);
  ASSERT_TRUE(p.fg().wait_for_log("envoy config reloaded", 5s, from)) << p.fg().log();
}

// The codes of `n` calls for `value`, in order ("OK"/"OVER_LIMIT").
std::vector<std::string> codes(const json::array& results, std::size_t from, std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = from; i < from + n; ++i)
    out.emplace_back(response(results, i).at("overall_code").as_string());
  return out;
}

TEST(rls_overrides, a_values_override_decides_its_counter_on_redis) {
  redis_server redis;
  rls_process p(redis.url());
  // One window of an hour for the whole test: two reloads (5 s each at most) and three client
  // runs (node, up to 2 s each to start on a loaded machine).
  inside_one_window(1h, 2 * 5s + 3 * 2s);
  reload(p, config_with("        - {value: 10.0.0.9, requests_per_unit: 4}\n"
                        "        - {prefix: 10.1., requests_per_unit: 1}\n"
                        "        - {prefix: 10.1.2., requests_per_unit: 3, unit: day}\n"));
  json::array calls;
  for (const char* v : {"10.0.0.9", "10.1.5.5", "10.1.2.7", "10.0.0.8"})
    for (int i = 0; i < 5; ++i) calls.push_back(check(request_of({{"remote_address", v}})));
  auto results = run_client(p, calls);
  using v = std::vector<std::string>;
  const std::string ok = "OK", over = "OVER_LIMIT";
  EXPECT_EQ(codes(results, 0, 5), (v{ok, ok, ok, ok, over})) << "the exact value's 4";
  EXPECT_EQ(codes(results, 5, 5), (v{ok, over, over, over, over})) << "the prefix's 1";
  EXPECT_EQ(codes(results, 10, 5), (v{ok, ok, ok, over, over})) << "the longest prefix's 3";
  EXPECT_EQ(codes(results, 15, 5), (v{ok, ok, over, over, over})) << "the rule's 2";
  const auto& limit = response(results, 10).at("statuses").at(0).at("current_limit");
  EXPECT_EQ(limit.at("requests_per_unit"), 3);
  EXPECT_EQ(limit.at("unit"), "DAY");

  // The exact value's override raised to 6: its count of 4 carries over (fixed_window, the
  // same window), so 2 are left, as a reload of the rule would leave them.
  reload(p, config_with("        - {value: 10.0.0.9, requests_per_unit: 6}\n"));
  results = run_client(p, {check(request_of({{"remote_address", "10.0.0.9"}})),
                           check(request_of({{"remote_address", "10.0.0.9"}})),
                           check(request_of({{"remote_address", "10.0.0.9"}}))});
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("limit_remaining"), 1);
  EXPECT_EQ(codes(results, 0, 3), (v{ok, ok, over}));

  // Removed: the rule's 2 against a count of 6.
  reload(p, config_with("        - {value: other, requests_per_unit: 6}\n"));
  results = run_client(p, {check(request_of({{"remote_address", "10.0.0.9"}}))});
  EXPECT_EQ(codes(results, 0, 1), (v{over}));
  EXPECT_EQ(response(results, 0).at("statuses").at(0).at("current_limit").at("requests_per_unit"),
            2);
}

}  // namespace
}  // namespace floodgate::test
