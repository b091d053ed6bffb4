// Reservations across an Envoy config reload (issue 27), through the real floodgated, a real
// redis-server and real gRPC calls (the Node client of tests/envoy): a reserving rate_limit whose
// limit the reload changes gives back what it held unspent at once; another rate_limit the
// reload left alone, and a rules file's reserving rule (reloaded by the same SIGHUP, unchanged),
// keep theirs: what is in force is every source's policies, never one source's alone. A grant
// that lands after the reload (its call began under the old config) goes back once that call
// has answered.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_server.hpp"
#include "reservation_state.hpp"
#include "rls_process.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::string envoy_config(int user_limit) {
  return R"(domain: edge
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: )" +
         std::to_string(user_limit) + R"(, reserve: 50, reserve_for: 10m}
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 100, reserve: 50, reserve_for: 10m}
)";
}

const char* const rules =
    "rules:\n  - {name: http, algorithm: fixed_window, limit: 100, window: 24h, reserve: 50, "
    "reserve_for: 10m}\n";

// What run_client needs: the gRPC address and a scratch dir.
struct grpc_target {
  std::string scratch;
  std::uint16_t port = 0;
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  const std::string& dir() const { return scratch; }
};

// The one state key of an Envoy counter (its policy's name is a hash of the rule's path).
std::string envoy_state_key(const redis_server& redis, const std::string& counter) {
  const auto r = redis.command({"KEYS", "floodgate:envoy.*:fw:{" + counter + "}"});
  if (r.elements.size() != 1) throw std::runtime_error("no single state key for " + counter);
  return r.elements[0].str;
}

// floodgated on `redis`, ready, with the rules file and `t`'s edge.yaml (the user limit at 100),
// its gRPC port in `t`.
std::unique_ptr<floodgated_process> start_with_envoy(const redis_server& redis, grpc_target& t) {
  write_file(t.scratch + "/edge.yaml", with_a_window_far_from_its_end(envoy_config(100)));
  floodgated_process::options o;
  o.extra_args = {"--redis",        redis.url() + "?timeout=2s", "--grpc-listen", "127.0.0.1:0",
                  "--envoy-config", t.scratch + "/edge.yaml"};
  auto fg = std::make_unique<floodgated_process>(with_a_window_far_from_its_end(rules), o);
  t.port = fg->grpc_port();
  if (!wait_for([&] { return http_request_once(fg->port(), "GET", "/readyz").status == 200; },
                10s))
    throw std::runtime_error("floodgated never became ready:\n" + fg->log());
  return fg;
}

constexpr int checks = 8;  // grants of 1, 2, 4 and 8: 7 of the last held

TEST(reservation_envoy_reload, a_changed_rate_limit_gives_back_its_units_only) {
  redis_server redis;
  grpc_target t{make_temp_dir("floodgate-reserve-envoy-")};
  auto started = start_with_envoy(redis, t);
  auto& fg = *started;

  json::array calls;
  for (int i = 0; i < checks; ++i) {
    calls.push_back(check(request_of({{"user", "u"}})));
    calls.push_back(check(request_of({{"tenant", "t"}})));
  }
  const auto results = run_client(t, calls);
  for (std::size_t i = 0; i < results.size(); ++i)
    ASSERT_EQ(response(results, i).at("overall_code").as_string(), "OK") << i;
  http_connection c(fg.port());
  for (int i = 0; i < checks; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", R"({"rule":"http","key":"k"})").status, 200);

  const auto user_key = envoy_state_key(redis, "user=u");
  const auto tenant_key = envoy_state_key(redis, "tenant=t");
  const auto http_key = std::string("floodgate:http:fw:{k}");
  const auto user_held = fixed_window_count(redis, user_key) - checks;
  const auto tenant_count = fixed_window_count(redis, tenant_key);
  const auto http_count = fixed_window_count(redis, http_key);
  ASSERT_GT(user_held, 0) << "a grant holds units unspent";
  ASSERT_GT(tenant_count, checks);
  ASSERT_GT(http_count, checks);

  const auto log_at = fg.log().size();
  write_file(t.scratch + "/edge.yaml", with_a_window_far_from_its_end(envoy_config(200)));
  fg.signal(SIGHUP);
  ASSERT_TRUE(fg.wait_for_log("envoy config reloaded", 5s, log_at)) << fg.log();
  ASSERT_TRUE(fg.wait_for_log("msg=\"config reloaded\"", 5s, log_at)) << fg.log();
  EXPECT_TRUE(wait_for([&] { return fixed_window_count(redis, user_key) == checks; }, 5s))
      << "the changed rate_limit's units back in Redis: count "
      << fixed_window_count(redis, user_key);
  EXPECT_TRUE(wait_for(
      [&] {
        return counter_on(fg.port(), "floodgate_reserved_units_given_back_total") == user_held;
      },
      5s))
      << counter_on(fg.port(), "floodgate_reserved_units_given_back_total") << " given back, held "
      << user_held;
  EXPECT_EQ(fixed_window_count(redis, tenant_key), tenant_count) << "left alone: kept";
  EXPECT_EQ(fixed_window_count(redis, http_key), http_count) << "the rules file's: kept";
  EXPECT_EQ(counter_on(fg.port(), units_given_back_of("http")), 0);
  std::error_code ec;
  std::filesystem::remove_all(t.scratch, ec);
}

// A call that began under the old config may take its grant after the reload's keep (its
// reservation was on its way to Redis, held here by CLIENT PAUSE WRITE): the call keeps the old
// config until it answers, and then the grant's unspent units go back (reservation_keeper's
// settle). Without that second keep they would stay held until swept.
TEST(reservation_envoy_reload, a_grant_landing_after_the_reload_goes_back_once_its_call_answered) {
  redis_server redis;
  grpc_target t{make_temp_dir("floodgate-reserve-envoy-late-")};
  auto started = start_with_envoy(redis, t);
  auto& fg = *started;
  // Grants of 1 and 2, all spent: the next call takes 4.
  const auto first = run_client(t, {check(request_of({{"user", "u"}})),
                                    check(request_of({{"user", "u"}})),
                                    check(request_of({{"user", "u"}}))});
  for (std::size_t i = 0; i < first.size(); ++i)
    ASSERT_EQ(response(first, i).at("overall_code").as_string(), "OK") << i;
  const auto user_key = envoy_state_key(redis, "user=u");
  ASSERT_EQ(fixed_window_count(redis, user_key), 3);

  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", "20000", "WRITE"}).str, "OK");
  // The late call from a client of its own (its own scratch files), answered after the unpause.
  grpc_target late{t.scratch + "/late", t.port};
  std::filesystem::create_directories(late.scratch);
  json::array late_results;
  std::string late_error;
  std::thread caller([&] {
    try {
      late_results = run_client(late, {check(request_of({{"user", "u"}}))});
    } catch (const std::exception& e) {
      late_error = e.what();
    }
  });
  // Its reservation waits in Redis (nothing else writes: no local-mode rule, no heartbeat).
  const auto blocked = [&] {
    return redis.command({"INFO", "clients"}).str.find("blocked_clients:1") != std::string::npos;
  };
  const bool held = wait_for(blocked, 10s);
  if (!held) redis.command({"CLIENT", "UNPAUSE"});
  if (!held) caller.join();
  ASSERT_TRUE(held) << redis.command({"INFO", "clients"}).str << late_error;

  const auto log_at = fg.log().size();
  write_file(t.scratch + "/edge.yaml", with_a_window_far_from_its_end(envoy_config(200)));
  fg.signal(SIGHUP);
  const bool reloaded = fg.wait_for_log("envoy config reloaded", 5s, log_at);
  ASSERT_EQ(redis.command({"CLIENT", "UNPAUSE"}).str, "OK");
  caller.join();
  ASSERT_TRUE(reloaded) << fg.log();
  ASSERT_TRUE(late_error.empty()) << late_error;
  ASSERT_EQ(response(late_results, 0).at("overall_code").as_string(), "OK");
  EXPECT_TRUE(wait_for([&] { return fixed_window_count(redis, user_key) == 4; }, 5s))
      << "the late grant's unspent units back in Redis: count "
      << fixed_window_count(redis, user_key) << ", admitted 4";
  EXPECT_TRUE(wait_for(
      [&] { return counter_on(fg.port(), "floodgate_reserved_units_given_back_total") == 3; }, 5s))
      << counter_on(fg.port(), "floodgate_reserved_units_given_back_total") << " given back";
  std::error_code ec;
  std::filesystem::remove_all(t.scratch, ec);
}

}  // namespace
}  // namespace floodgate::test
