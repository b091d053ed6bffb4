// A misconfigured Redis is loud: the server's own error text reaches backend::last_error()
// (which floodgated logs), and readiness is false while calls fail for a reason that will
// not heal by itself. Against a real redis-server with requirepass and ACL users.
#include <gtest/gtest.h>

#include <thread>

#include "fake_redis.hpp"
#include "info_text.hpp"
#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

const policy p{"p", algorithm::gcra, 10, 1s};

// Waits until last_error() contains `text`; returns what it said last.
std::string wait_error(const backend& b, std::string_view text,
                       std::chrono::milliseconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::string e;
  while ((e = b.last_error()).find(text) == std::string::npos &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  return e;
}

backend_options short_deadline() {
  backend_options o;
  o.redis.timeout = 300ms;
  o.redis.key_prefix = unique_prefix("misconf");
  return o;
}

TEST(misconfigured_redis, the_servers_own_words_are_told) {
  redis_server redis;
  redis.command({"ACL", "SETUSER", "limiter", "on", ">pw", "~*", "+@all"});
  const auto host = "127.0.0.1:" + std::to_string(redis.port());
  struct bad {
    std::string url, says;
  } cases[] = {{"redis://limiter:wrong@" + host, "WRONGPASS"},
               {"redis://nobody:pw@" + host, "WRONGPASS"},
               {"redis://limiter:pw@" + host + "/99", "DB index is out of range"},
               {"redis://no-such-host.invalid:6379", "resolve no-such-host.invalid"}};
  for (const auto& c : cases) {
    limiter l{c.url, short_deadline()};
    EXPECT_EQ(l.check("k", p).outcome, outcome::backend_error) << c.url;
    const auto said = wait_error(l.get_backend(), c.says);
    EXPECT_NE(said.find(c.says), std::string::npos) << c.url << " said: " << said;
    EXPECT_FALSE(l.get_backend().healthy()) << c.url;
  }
  redis.command({"CONFIG", "SET", "requirepass", "letmein"});
  limiter l{"redis://" + host, short_deadline()};
  EXPECT_EQ(l.check("k", p).outcome, outcome::backend_error);
  EXPECT_NE(wait_error(l.get_backend(), "NOAUTH").find("NOAUTH"), std::string::npos);
}

// An ACL user that may connect but not run the scripts: every call fails with NOPERM. Ready
// would be a lie (before: /readyz said 200 while every check failed). Fixing the ACL heals it.
// The user may load the library but not FCALL it: the call goes on as EVALSHA, which is
// refused too, and that is the error told.
TEST(misconfigured_redis, noperm_on_evalsha_is_not_ready_until_fixed) {
  redis_server redis;
  redis.command(
      {"ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all", "-evalsha", "-fcall"});
  limiter l{"redis://noscripts:pw@127.0.0.1:" + std::to_string(redis.port()), short_deadline()};
  ASSERT_TRUE(wait_healthy(l.get_backend())) << "it connects: the handshake is allowed";
  const auto r = l.check("k", p);
  EXPECT_EQ(r.outcome, outcome::backend_error);
  EXPECT_EQ(r.error, errc::server_error);
  EXPECT_FALSE(l.get_backend().healthy()) << "NOPERM will not heal by itself";
  EXPECT_NE(l.get_backend().last_error().find("NOPERM"), std::string::npos)
      << l.get_backend().last_error();

  redis.command({"ACL", "SETUSER", "noscripts", "+evalsha"});
  EXPECT_EQ(l.check("k", p).outcome, outcome::allowed);
  EXPECT_TRUE(l.get_backend().healthy());
  EXPECT_EQ(l.get_backend().last_error(), "");
}

// The least-privilege ACL user docs/operations.md gives works for every algorithm, and for
// the version check (HELLO).
// The user docs/operations.md documents, and the one it documented before fixed_window used
// INCRBY (the scripts then fall back to SET ... KEEPTTL): each runs every algorithm, and its
// refunds.
// Returns the FCALLs Redis ran.
long long runs_every_algorithm_as(const std::vector<std::string>& commands) {
  redis_server redis;
  std::vector<std::string> acl = {"ACL",          "SETUSER",       "floodgate", "on",
                                  ">s3cret",      "~floodgate:*",  "resetchannels", "-@all"};
  acl.insert(acl.end(), commands.begin(), commands.end());
  const auto set = redis.command(acl);
  EXPECT_EQ(set.str, "OK");
  backend_options o;
  o.redis.timeout = 2s;
  limiter l{"redis://floodgate:s3cret@127.0.0.1:" + std::to_string(redis.port()), o};
  for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                 algorithm::token_bucket, algorithm::gcra}) {
    // Limit 12: the windows' second admission onwards adds in place (INCRBY), and the tenth
    // changes the count's digits (SET).
    const policy q{"acl_" + std::string(to_string(a)), a, 12, 60s};
    const std::string key = "k" + std::string(to_string(a));
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(l.check(key, q).outcome, outcome::allowed)
          << to_string(a) << " check " << i << ": " << l.get_backend().last_error();
    EXPECT_EQ(l.check(key, q).outcome, outcome::over_limit) << to_string(a);
    // Refunds too, with a marker: part of the state (sliding_log cuts its newest entries),
    // then the rest (the state goes).
    for (const auto& [cost, id] : {std::pair{5, "part"}, std::pair{12, "rest"}}) {
      const auto r = l.refund(key, q, cost, id);
      EXPECT_EQ(r.outcome, outcome::allowed)
          << to_string(a) << " refund " << cost << ": " << l.get_backend().last_error();
      EXPECT_EQ(r.refunded, cost == 5 ? 5 : 7) << to_string(a);
    }
    EXPECT_EQ(l.reset(key, q), std::error_code{}) << to_string(a);
  }
  EXPECT_TRUE(l.get_backend().healthy());
  EXPECT_EQ(l.get_backend().last_error(), "");
  return command_stat(redis, "fcall");
}

const std::vector<std::string> acl_before_incrby = {
    "+evalsha", "+eval", "+script|load", "+del",  "+auth",  "+select",          "+hello",
    "+cluster|slots", "+asking", "+time", "+get", "+set", "+zadd",  "+zcard", "+zrange",
    "+zrank", "+zrem", "+zremrangebyscore", "+pexpire"};

TEST(misconfigured_redis, the_documented_acl_user_runs_every_algorithm) {
  auto commands = acl_before_incrby;
  for (const char* c : {"+incrby", "+fcall", "+function|load", "+unlink"}) commands.push_back(c);
  EXPECT_GT(runs_every_algorithm_as(commands), 0) << "as functions";
}

// The user documented before the scripts ran as functions: they run as EVALSHA, and nothing
// about the refused FUNCTION LOAD is an error.
TEST(misconfigured_redis, a_user_without_incrby_or_functions_runs_every_algorithm) {
  EXPECT_EQ(runs_every_algorithm_as(acl_before_incrby), 0) << "as EVALSHA";
}

// A user that may load the library but not call it: the first FCALL is refused, the call goes
// again as EVALSHA, and the connection stays on EVALSHA; nothing fails or counts twice.
TEST(misconfigured_redis, a_user_denied_fcall_alone_falls_back_to_evalsha) {
  redis_server redis;
  redis.command({"ACL", "SETUSER", "nofcall", "on", ">pw", "~*", "+@all", "-fcall"});
  auto o = short_deadline();
  o.redis.connections = 1;
  limiter l{"redis://nofcall:pw@127.0.0.1:" + std::to_string(redis.port()), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  const policy q{"q", algorithm::fixed_window, 5, 1h};
  int admitted = 0;
  for (int i = 0; i < 10; ++i) {
    const auto r = l.check("k", q);
    ASSERT_NE(r.outcome, outcome::backend_error) << i << ": " << r.error.message();
    admitted += r.outcome == outcome::allowed;
  }
  EXPECT_EQ(admitted, 5);
  EXPECT_EQ(command_stat(redis, "fcall", "rejected_calls") +
                command_stat(redis, "fcall", "failed_calls"),
            1)
      << "refused once, then not tried again on that connection";
  EXPECT_TRUE(l.get_backend().healthy());
  EXPECT_EQ(l.get_backend().last_error(), "");
}

// A transient error (a key of another type) is told but leaves the backend ready.
TEST(misconfigured_redis, a_wrongtype_key_is_not_a_readiness_problem) {
  redis_server redis;
  auto o = short_deadline();
  limiter l{redis.url(), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  redis.command({"SET", o.redis.key_prefix + "q:sl:{k}", "x"});
  const policy q{"q", algorithm::sliding_log, 10, 1s};
  EXPECT_EQ(l.check("k", q).outcome, outcome::backend_error);
  EXPECT_TRUE(l.get_backend().healthy());
  EXPECT_NE(l.get_backend().last_error().find("WRONGTYPE"), std::string::npos);
}

// floodgate's scripts start with #!lua: Redis >= 7.0, checked at connect with a clear message
// (a real Redis 6 is not on this machine; the fake answers HELLO as one would).
TEST(misconfigured_redis, a_redis_older_than_7_is_refused_at_connect) {
  fake_redis::options old;
  old.version = "6.2.14";
  fake_redis fake(
      [](const fake_redis::command& c) {
        return fake_redis::is_script_load(c) ? fake_redis::sha_reply(c) : std::string("+OK\r\n");
      },
      old);
  limiter l{fake.url(), short_deadline()};
  EXPECT_EQ(l.check("k", p).outcome, outcome::backend_error);
  const auto said = wait_error(l.get_backend(), "too old");
  EXPECT_NE(said.find("Redis 6.2.14 is too old: floodgate needs Redis >= 7.0"), std::string::npos)
      << said;
  EXPECT_FALSE(l.get_backend().healthy());
}

}  // namespace
}  // namespace floodgate::test
