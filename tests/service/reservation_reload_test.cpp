// Reservations across a reload (issue 27), through the real floodgated and a real redis-server:
// a reserving rule takes grants through /v1/check, a reload changes or removes it (or one of its
// overrides), and the units it held unspent come back at once, in the key's state in Redis and
// in floodgate_rule_reserved_units_given_back_total; a reserving rule (or override) the reload
// left alone keeps its grant. Before floodgated called keep_reservations_of, the units stayed
// held until swept: the count in Redis stayed at what was reserved.
//
// Windows of a day and grants of up to 10 minutes: no grant ends while a test runs (only in the
// last 10 minutes of a UTC day are grants cut shorter, and then they may hold less).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>

#include "floodgated_process.hpp"
#include "http_client.hpp"
#include "redis_server.hpp"
#include "reservation_state.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<floodgated_process> start_on(const redis_server& redis, const std::string& rules) {
  floodgated_process::options opts;
  opts.extra_args = {"--redis", redis.url() + "?timeout=2s"};
  auto fg = std::make_unique<floodgated_process>(with_a_window_far_from_its_end(rules), opts);
  if (!wait_for([&] { return http_request_once(fg->port(), "GET", "/readyz").status == 200; }, 10s))
    throw std::runtime_error("floodgated never became ready:\n" + fg->log());
  return fg;
}

// `n` checks of (rule, key), each admitted.
void admit(std::uint16_t port, const std::string& rule, const std::string& key, int n) {
  http_connection c(port);
  for (int i = 0; i < n; ++i) {
    const auto r =
        c.request("POST", "/v1/check", R"({"rule":")" + rule + R"(","key":")" + key + "\"}");
    ASSERT_EQ(r.status, 200) << r.body;
  }
}

std::string state_key(const std::string& rule, const std::string& key) {
  return "floodgate:" + rule + ":fw:{" + key + "}";
}

// 8 checks: grants of 1, 2, 4 and 8 (each sized from the last), 7 of the last held.
constexpr int checks = 8;

const char* const two_rules = R"(rules:
  - {name: hot, algorithm: fixed_window, limit: 100, window: 24h, reserve: 50, reserve_for: 10m}
  - {name: kept, algorithm: fixed_window, limit: 100, window: 24h, reserve: 50, reserve_for: 10m}
)";

// `after`: the rules file the reload reads (hot changed or removed, kept as it was).
void a_reload_gives_back_what_a_changed_rule_held(const std::string& after) {
  redis_server redis;
  auto fg = start_on(redis, two_rules);
  admit(fg->port(), "hot", "k", checks);
  admit(fg->port(), "kept", "k", checks);
  const auto hot_held = fixed_window_count(redis, state_key("hot", "k")) - checks;
  const auto kept_count = fixed_window_count(redis, state_key("kept", "k"));
  ASSERT_GT(hot_held, 0) << "a grant holds units unspent";
  ASSERT_GT(kept_count, checks);

  const auto log_at = fg->log().size();
  fg->write_rules(with_a_window_far_from_its_end(after));
  fg->signal(SIGHUP);
  ASSERT_TRUE(fg->wait_for_log("config reloaded", 5s, log_at)) << fg->log();
  EXPECT_TRUE(
      wait_for([&] { return fixed_window_count(redis, state_key("hot", "k")) == checks; }, 5s))
      << "hot's unspent units back in Redis: count "
      << fixed_window_count(redis, state_key("hot", "k")) << ", admitted " << checks;
  EXPECT_TRUE(
      wait_for([&] { return counter_on(fg->port(), units_given_back_of("hot")) == hot_held; }, 5s))
      << counter_on(fg->port(), units_given_back_of("hot")) << " given back, held " << hot_held;
  EXPECT_TRUE(fg->wait_for_log("reservations given back", 5s, log_at)) << fg->log();
  // The rule the reload left alone keeps its grant, and spends it.
  EXPECT_EQ(fixed_window_count(redis, state_key("kept", "k")), kept_count);
  EXPECT_EQ(counter_on(fg->port(), units_given_back_of("kept")), 0);
  admit(fg->port(), "kept", "k", 1);
  EXPECT_EQ(fixed_window_count(redis, state_key("kept", "k")), kept_count)
      << "answered from the grant it kept";
}

TEST(reservation_reload, a_changed_limit_gives_back_the_old_policys_units) {
  a_reload_gives_back_what_a_changed_rule_held(R"(rules:
  - {name: hot, algorithm: fixed_window, limit: 200, window: 24h, reserve: 50, reserve_for: 10m}
  - {name: kept, algorithm: fixed_window, limit: 100, window: 24h, reserve: 50, reserve_for: 10m}
)");
}

TEST(reservation_reload, a_removed_rule_gives_back_its_units) {
  a_reload_gives_back_what_a_changed_rule_held(R"(rules:
  - {name: kept, algorithm: fixed_window, limit: 100, window: 24h, reserve: 50, reserve_for: 10m}
)");
}

// An override's policy is in force as its rule's is: a reload that changes one override gives
// back that override's keys' units, not another override's.
TEST(reservation_reload, a_changed_override_gives_back_its_keys_units_only) {
  const auto rules = [](int gold_limit) {
    return R"(rules:
  - name: hot
    algorithm: fixed_window
    limit: 100
    window: 24h
    reserve: 50
    reserve_for: 10m
    overrides:
      - {key: vip, limit: 80}
      - {key: gold, limit: )" +
           std::to_string(gold_limit) + "}\n";
  };
  redis_server redis;
  auto fg = start_on(redis, rules(90));
  admit(fg->port(), "hot", "vip", checks);
  admit(fg->port(), "hot", "gold", checks);
  const auto gold_held = fixed_window_count(redis, state_key("hot", "gold")) - checks;
  const auto vip_count = fixed_window_count(redis, state_key("hot", "vip"));
  ASSERT_GT(gold_held, 0);
  ASSERT_GT(vip_count, checks);

  const auto log_at = fg->log().size();
  fg->write_rules(with_a_window_far_from_its_end(rules(95)));
  fg->signal(SIGHUP);
  ASSERT_TRUE(fg->wait_for_log("config reloaded", 5s, log_at)) << fg->log();
  EXPECT_TRUE(
      wait_for([&] { return fixed_window_count(redis, state_key("hot", "gold")) == checks; }, 5s))
      << fixed_window_count(redis, state_key("hot", "gold"));
  EXPECT_TRUE(
      wait_for([&] { return counter_on(fg->port(), units_given_back_of("hot")) == gold_held; }, 5s))
      << counter_on(fg->port(), units_given_back_of("hot")) << " given back, held " << gold_held;
  EXPECT_EQ(fixed_window_count(redis, state_key("hot", "vip")), vip_count)
      << "the override the reload left alone keeps its grant";
}

// A check that began under the old rules may take its grant after the reload's keep (its
// reservation was on its way to Redis, held here by CLIENT PAUSE WRITE): the grant lands under
// the removed rule's policy, answers that check, and the rest goes back once no check holds the
// old rules any more. Before, those units stayed held until swept.
TEST(reservation_reload, a_grant_landing_after_the_reload_goes_back_once_its_check_answered) {
  redis_server redis;
  auto fg = start_on(redis, two_rules);
  admit(fg->port(), "hot", "k", 3);  // grants of 1 and 2, all spent: the next one takes 4
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", "20000", "WRITE"}).str, "OK");
  http_connection c(fg->port());
  const std::string body = R"({"rule":"hot","key":"k"})";
  ASSERT_TRUE(c.send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  // Its reservation waits in Redis (no other write is sent: no local-mode rule, no heartbeat).
  const auto blocked = [&] {
    return redis.command({"INFO", "clients"}).str.find("blocked_clients:1") != std::string::npos;
  };
  ASSERT_TRUE(wait_for(blocked, 5s)) << redis.command({"INFO", "clients"}).str;

  const auto log_at = fg->log().size();
  fg->write_rules(with_a_window_far_from_its_end(R"(rules:
  - {name: kept, algorithm: fixed_window, limit: 100, window: 24h, reserve: 50, reserve_for: 10m}
)"));
  fg->signal(SIGHUP);
  ASSERT_TRUE(fg->wait_for_log("config reloaded", 5s, log_at)) << fg->log();
  ASSERT_EQ(redis.command({"CLIENT", "UNPAUSE"}).str, "OK");
  const auto r = c.read_reply();
  ASSERT_EQ(r.status, 200) << r.body;
  const auto held = fixed_window_count(redis, state_key("hot", "k")) - 4;
  // (It may have gone back already: then the count is 4 and held 0.)
  EXPECT_TRUE(wait_for([&] { return fixed_window_count(redis, state_key("hot", "k")) == 4; }, 5s))
      << "the late grant's unspent units back in Redis: count "
      << fixed_window_count(redis, state_key("hot", "k")) << ", admitted 4";
  EXPECT_TRUE(wait_for([&] { return counter_on(fg->port(), units_given_back_of("hot")) == 3; }, 5s))
      << counter_on(fg->port(), units_given_back_of("hot")) << " given back, held " << held;
}

}  // namespace
}  // namespace floodgate::test
