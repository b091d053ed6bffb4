// The Redis backend end to end against a real redis-server: decisions, all-or-nothing,
// reset, key layout, scripts loaded on connect, AUTH and SELECT, error replies, caps, and
// what happens to calls in flight when the backend goes away.
#include "redis/redis_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>

#include "integration_support.hpp"
#include "memory/memory_backend.hpp"
#include "redis/scripts.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

constexpr algorithm all_algorithms[] = {algorithm::sliding_log, algorithm::sliding_window,
                                        algorithm::fixed_window, algorithm::token_bucket,
                                        algorithm::gcra};

class redis_backend_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new redis_server(); }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
  }
  static redis_server* redis_;
};
redis_server* redis_backend_test::redis_ = nullptr;

TEST_F(redis_backend_test, kind_and_health) {
  auto b = make_backend(redis_->url());
  EXPECT_EQ(b->kind(), "redis");
  EXPECT_TRUE(wait_healthy(*b));
}

// The same requests at the same times give the same decisions as the memory backend (the
// reference), field by field, for every algorithm. The Lua suite does this exhaustively on
// the scripts; this checks the backend's encoding and decoding around them.
TEST_F(redis_backend_test, decisions_match_the_memory_backend) {
  auto now = std::make_shared<std::atomic<std::int64_t>>(clock_start_ms);
  clock_fn clock = [now] { return std::chrono::milliseconds(now->load()); };
  for (algorithm a : all_algorithms) {
    const policy p{"match", a, 5, 1000ms,
                   takes_burst(a) ? std::optional<std::int64_t>(7) : std::nullopt};
    now->store(clock_start_ms);
    limiter redis{redis_->url(), redis_options_for(unique_prefix("match"), clock)};
    memory_options mo;
    mo.clock = clock;
    limiter memory{std::make_shared<memory::memory_backend>(mo)};
    const std::int64_t steps[][2] = {{0, 1},   {0, 1},    {1, 3}, {0, 0},   {10, 2},
                                     {100, 1}, {250, 4},  {0, 1}, {400, 1}, {999, 2},
                                     {1, 1},   {2000, 5}, {0, 1}};
    for (const auto& [advance, cost] : steps) {
      now->fetch_add(advance);
      const auto want = memory.check("k", p, cost);
      const auto got = redis.check("k", p, cost);
      ASSERT_EQ(got.outcome, want.outcome)
          << to_string(a) << " at " << *now << " cost " << cost << ": " << got.error.message();
      EXPECT_EQ(got.decision, want.decision) << to_string(a) << " at " << *now << " cost " << cost;
    }
  }
}

TEST_F(redis_backend_test, check_all_is_all_or_nothing) {
  limiter l{redis_->url(), redis_options_for(unique_prefix("all"), fixed_clock())};
  const policy user{"user", algorithm::fixed_window, 3, 1min};
  const policy ip{"ip", algorithm::sliding_log, 1, 1min};
  auto r = l.check_all({{"alice", &user, 1}, {"10.0.0.1", &ip, 1}});
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_EQ(r.decisions[0].remaining, 2);
  EXPECT_EQ(r.decisions[1].remaining, 0);
  // The IP is spent: the pair is denied, and the user's count is untouched.
  r = l.check_all({{"alice", &user, 1}, {"10.0.0.1", &ip, 1}});
  EXPECT_EQ(r.outcome, outcome::over_limit);
  ASSERT_EQ(r.decisions.size(), 2u);
  EXPECT_TRUE(r.decisions[0].allowed);
  EXPECT_EQ(r.decisions[0].remaining, 1) << "as if alone, against the unchanged state";
  EXPECT_FALSE(r.decisions[1].allowed);
  EXPECT_EQ(l.check("alice", user, 0).decision.remaining, 2);
}

TEST_F(redis_backend_test, reset_forgets_the_state) {
  limiter l{redis_->url(), redis_options_for(unique_prefix("reset"), fixed_clock())};
  const policy p{"p", algorithm::token_bucket, 2, 1h};
  EXPECT_TRUE(l.check("bob", p).decision.allowed);
  EXPECT_TRUE(l.check("bob", p).decision.allowed);
  EXPECT_FALSE(l.check("bob", p).decision.allowed);
  EXPECT_EQ(l.reset("bob", p), std::error_code{});
  EXPECT_TRUE(l.check("bob", p).decision.allowed);
  EXPECT_EQ(l.reset("nobody", p), std::error_code{}) << "resetting an absent key is fine";
}

TEST_F(redis_backend_test, state_lives_under_the_documented_key_with_a_ttl) {
  const auto prefix = unique_prefix("layout");
  limiter l{redis_->url(), redis_options_for(prefix)};
  const policy p{"api", algorithm::gcra, 10, 10s};
  ASSERT_TRUE(l.check("alice", p).decision.allowed);
  const auto keys = scan_keys(*redis_, prefix + "*");
  ASSERT_EQ(keys, std::vector<std::string>{prefix + "api:gt1000:{alice}"});
  const auto ttl = redis_->command({"PTTL", keys[0]}).integer;
  EXPECT_GT(ttl, 0);
  // One emission interval (W / L), to the end of the second the TAT lies in (lua/gcra.lua).
  EXPECT_LE(ttl, 2000);
}

// A token bucket's state is kept in its reduced rate (L and W over their gcd), so common
// policies keep it one 8-byte integer: 100 per minute counts a token as 600 units rather
// than 60,000, and the packed (time, level) stays within 19 digits.
TEST_F(redis_backend_test, token_bucket_state_of_common_rates_is_one_integer) {
  const auto prefix = unique_prefix("tbint");
  limiter l{redis_->url(), redis_options_for(prefix)};
  const std::pair<policy, std::string> cases[] = {
      {policy{"m", algorithm::token_bucket, 100, 60s}, "m:tb600:{k}"},
      {policy{"h", algorithm::token_bucket, 60, 60s}, "h:tb1000:{k}"},
      {policy{"s", algorithm::token_bucket, 10, 1s, 20}, "s:tb100:{k}"},
  };
  for (const auto& [p, suffix] : cases) {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(l.check("k", p, 1 + i).decision.allowed) << p.name();
    const auto keys = scan_keys(*redis_, prefix + p.name() + ":*");
    ASSERT_EQ(keys, std::vector<std::string>{prefix + suffix});
    EXPECT_EQ(redis_->command({"OBJECT", "ENCODING", keys[0]}).str, "int")
        << p.name() << ": " << redis_->command({"GET", keys[0]}).str;
    // Six taken of the burst: the decisions are those of the unreduced rate.
    const auto peek = l.check("k", p, 0).decision;
    EXPECT_EQ(peek.remaining, p.burst() - 6) << p.name();
  }
}

// Without the function library (?functions=no, or a server that refuses it) calls go as
// EVALSHA, so the greeting loads every script; with the library it loads none (FCALL).
TEST_F(redis_backend_test, every_script_is_loaded_on_connect_under_its_build_time_sha1) {
  std::vector<std::string> args = {"SCRIPT", "EXISTS"};
  for (algorithm a : all_algorithms) args.emplace_back(redis::script_for(a).sha1);
  args.emplace_back(redis::multi_script().sha1);
  args.emplace_back(redis::batch_script().sha1);
  redis_->command({"SCRIPT", "FLUSH"});
  {
    auto b = make_backend(redis_->url());
    ASSERT_TRUE(wait_healthy(*b));
    const auto r = redis_->command(args);
    ASSERT_EQ(r.elements.size(), 7u);
    for (const auto& e : r.elements) EXPECT_EQ(e.integer, 0) << "the library needs none";
  }
  auto b = make_backend(redis_->url() + "?functions=no");
  ASSERT_TRUE(wait_healthy(*b));
  const auto r = redis_->command(args);
  ASSERT_EQ(r.elements.size(), 7u);
  for (const auto& e : r.elements) EXPECT_EQ(e.integer, 1);
  // And SCRIPT LOAD agrees with the build-time SHA1 of the exact text.
  for (algorithm a : all_algorithms)
    EXPECT_EQ(redis_->command({"SCRIPT", "LOAD", std::string(redis::script_for(a).source)}).str,
              redis::script_for(a).sha1);
}

TEST_F(redis_backend_test, a_host_name_is_resolved) {
  // "localhost" may resolve to ::1 first, where nothing listens: the next address is tried.
  limiter l{"redis://localhost:" + std::to_string(redis_->port()),
            redis_options_for(unique_prefix("name"))};
  const policy p{"p", algorithm::gcra, 10, 1s};
  const auto r = l.check("k", p);
  EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();
}

TEST_F(redis_backend_test, nothing_listening_fails_fast_with_not_connected) {
  redis_server doomed;
  const auto url = doomed.url();
  doomed.kill();
  backend_options o;
  o.redis.timeout = 2s;  // long: failing fast must not depend on the deadline
  limiter l{url, o};
  const policy p{"p", algorithm::gcra, 1, 1s};
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = l.check("k", p);
    EXPECT_EQ(r.outcome, outcome::backend_error);
    EXPECT_EQ(r.error, errc::not_connected) << r.error.message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  }
  EXPECT_FALSE(l.get_backend().healthy());
}

TEST_F(redis_backend_test, select_db_from_the_url) {
  const auto prefix = unique_prefix("db");
  limiter l{redis_->url() + "/5", redis_options_for(prefix)};
  const policy p{"p", algorithm::fixed_window, 10, 1min};
  ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);
  EXPECT_TRUE(scan_keys(*redis_, prefix + "*").empty()) << "not in db 0";
  const auto info = redis_->command({"INFO", "keyspace"}).str;
  EXPECT_NE(info.find("db5:keys="), std::string::npos) << info;
  redis_->command({"EVAL", "redis.call('SELECT', 5) return redis.call('FLUSHDB')", "0"});
}

TEST_F(redis_backend_test, options_in_the_url_override_the_options_in_code) {
  const auto prefix = unique_prefix("urlopt");
  backend_options o;
  o.redis.key_prefix = "not-this:";
  auto b = make_backend(redis_->url() + "?key_prefix=" + prefix + "&timeout=2s&connections=3", o);
  const auto& redis = dynamic_cast<const redis::redis_backend&>(*b);
  EXPECT_EQ(redis.options().timeout, 2000ms);
  EXPECT_EQ(redis.options().connections, 3u);
  limiter l{b};
  ASSERT_EQ(l.check("k", policy{"p", algorithm::gcra, 10, 1s}).outcome, outcome::allowed);
  EXPECT_EQ(scan_keys(*redis_, prefix + "*"), std::vector<std::string>{prefix + "p:gt100:{k}"});
  EXPECT_TRUE(scan_keys(*redis_, "not-this:*").empty());
}

TEST(redis_auth, acl_user_and_password_and_wrong_password) {
  redis_server redis;
  redis.command({"ACL", "SETUSER", "limiter", "on", ">s3cret p@ss", "~fgt:*", "+@all"});
  const auto host = "127.0.0.1:" + std::to_string(redis.port());
  const policy p{"p", algorithm::gcra, 10, 1s};
  {
    limiter l{"redis://limiter:s3cret%20p%40ss@" + host, redis_options_for(unique_prefix("acl"))};
    const auto r = l.check("k", p);
    EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();
    const auto clients = redis.command({"CLIENT", "LIST"}).str;
    EXPECT_NE(clients.find("user=limiter"), std::string::npos) << clients;
  }
  {
    // The ACL user may only touch fgt:* keys: the default prefix is refused, as an error reply.
    limiter l{"redis://limiter:s3cret%20p%40ss@" + host};
    const auto r = l.check("k", p);
    EXPECT_EQ(r.outcome, outcome::backend_error);
    EXPECT_EQ(r.error, errc::server_error) << r.error.message();
  }
  {
    backend_options o;
    o.redis.timeout = 300ms;
    limiter l{"redis://limiter:wrong@" + host, o};
    const auto r = l.check("k", p);
    EXPECT_EQ(r.outcome, outcome::backend_error);
    EXPECT_FALSE(l.get_backend().healthy());
  }
  // Password only (the default user), set last: the fixture's own commands do not AUTH.
  redis.command({"CONFIG", "SET", "requirepass", "letmein"});
  {
    limiter l{"redis://:letmein@" + host, redis_options_for(unique_prefix("pw"))};
    const auto r = l.check("k", p);
    EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();
  }
  {
    backend_options o;
    o.redis.timeout = 300ms;
    limiter l{"redis://" + host, o};  // no password: the handshake fails with NOAUTH
    EXPECT_EQ(l.check("k", p).outcome, outcome::backend_error);
    EXPECT_FALSE(l.get_backend().healthy());
  }
}

TEST_F(redis_backend_test, busy_and_oom_replies_map_to_their_codes) {
  redis_server redis;
  const policy p{"p", algorithm::sliding_log, 100, 1min};
  backend_options o = redis_options_for(unique_prefix("err"));
  o.redis.timeout = 2s;
  limiter l{redis.url(), o};
  ASSERT_EQ(l.check("k", p).outcome, outcome::allowed);

  // OOM: the scripts declare themselves writers (#!lua), so Redis refuses them whole.
  redis.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  redis.command({"CONFIG", "SET", "maxmemory", "1"});
  auto r = l.check("k", p);
  EXPECT_EQ(r.error, errc::out_of_memory) << r.error.message();
  redis.command({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(l.check("k", p).outcome, outcome::allowed);

  // BUSY: another client's script runs past busy-reply-threshold.
  redis.command({"CONFIG", "SET", "busy-reply-threshold", "20"});
  std::thread hog([&] {
    try {
      redis.command({"EVAL", "while true do end", "0"});
    } catch (const std::exception&) {
      // the fixture's 1 s timeout; SCRIPT KILL below ends the script
    }
  });
  std::this_thread::sleep_for(100ms);
  r = l.check("k", p);
  EXPECT_EQ(r.error, errc::server_busy) << r.error.message();
  EXPECT_EQ(r.outcome, outcome::backend_error);
  for (int i = 0; i < 50; ++i) {
    try {
      if (redis.command({"SCRIPT", "KILL"}).kind != reply::error) break;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(20ms);
  }
  hog.join();
  EXPECT_EQ(l.check("k", p).outcome, outcome::allowed);
}

TEST_F(redis_backend_test, a_reply_over_max_reply_size_is_a_protocol_error) {
  backend_options o = redis_options_for(unique_prefix("cap"), fixed_clock());
  o.redis.max_reply_size = 256;  // one decision (~30 bytes) fits; sixteen do not
  limiter l{redis_->url(), o};
  const policy p{"p", algorithm::fixed_window, 1000, 1min};
  std::vector<std::string> keys;
  std::vector<check_item> items;
  for (int i = 0; i < 16; ++i) keys.push_back("k" + std::to_string(i));
  for (const auto& k : keys) items.push_back({k, &p, 1});
  ASSERT_EQ(l.check("k0", p).outcome, outcome::allowed);
  const auto r = l.check_all(items);
  EXPECT_EQ(r.outcome, outcome::backend_error);
  EXPECT_EQ(r.error, errc::protocol_error) << r.error.message();
  // The connection was dropped; the next calls get a fresh one.
  check_result after;
  for (int i = 0; i < 100; ++i) {
    after = l.check("k0", p);
    if (after.outcome == outcome::allowed) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(after.outcome, outcome::allowed) << after.error.message();
  EXPECT_EQ(after.decision.remaining, 1000 - 3) << "the multi call ran; k0 counted three times";
}

TEST_F(redis_backend_test, pending_calls_are_capped_per_connection) {
  redis_server redis;
  backend_options o;
  o.redis.connections = 1;
  o.redis.max_pending_per_connection = 4;
  o.redis.timeout = 1s;
  auto b = make_backend(redis.url(), o);
  ASSERT_TRUE(wait_healthy(*b));
  redis.pause();
  const policy p{"p", algorithm::gcra, 10, 1s};
  const check_item item{"k", &p, 1};
  std::mutex m;
  std::map<std::string, int> early, late;
  completion_counter done(10);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i)
    b->async_check(std::span(&item, 1), [&](backend_reply r) {
      {
        std::lock_guard lock(m);
        // Before the deadline or at it: the order the design gives, whatever the machine's
        // speed (a refusal is immediate, a queued call waits out its deadline).
        auto& codes = std::chrono::steady_clock::now() - start < o.redis.timeout ? early : late;
        ++codes[r.error.message()];
      }
      done.done();
    });
  EXPECT_TRUE(done.wait(10s));
  redis.resume();
  std::lock_guard lock(m);
  // Six refused at once; the four admitted to the queue wait for their deadline, where each
  // times out alone (or, if the silent connection is dropped first at connect_timeout, fails
  // with not_connected).
  EXPECT_EQ(early[make_error_code(errc::not_connected).message()], 6);
  EXPECT_EQ(early.size(), 1u);
  EXPECT_GE(late[make_error_code(errc::timeout).message()], 1);
  EXPECT_EQ(late[make_error_code(errc::timeout).message()] +
                late[make_error_code(errc::not_connected).message()],
            4);
}

TEST_F(redis_backend_test, destruction_completes_everything_in_flight_exactly_once) {
  redis_server redis;
  backend_options o;
  o.redis.timeout = 10s;
  auto b = make_backend(redis.url(), o);
  ASSERT_TRUE(wait_healthy(*b));
  redis.pause();  // nothing will answer
  const policy p{"p", algorithm::gcra, 10, 1s};
  const check_item item{"k", &p, 1};
  constexpr int n = 1000;
  std::vector<std::atomic<int>> calls(n);
  std::atomic<int> shutting_down{0};
  for (int i = 0; i < n; ++i)
    b->async_check(std::span(&item, 1), [&, i](backend_reply r) {
      calls[i].fetch_add(1);
      if (r.error == errc::shutting_down) shutting_down.fetch_add(1);
    });
  std::this_thread::sleep_for(20ms);  // some written, some queued
  const auto start = std::chrono::steady_clock::now();
  b.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  for (int i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << i;
  EXPECT_EQ(shutting_down.load(), n);
  redis.resume();
}

TEST_F(redis_backend_test, the_last_owner_may_let_go_inside_a_completion) {
  auto b = make_backend(redis_->url(), redis_options_for(unique_prefix("self")));
  const policy p{"p", algorithm::gcra, 10, 1s};
  const check_item item{"k", &p, 1};
  std::promise<std::error_code> first;
  std::atomic<int> later{0};
  completion_counter all(2);
  auto* raw = b.get();
  // The handler holds the only reference and drops it: the backend is destroyed on its own
  // thread. The second call, queued behind, still completes exactly once.
  raw->async_check(std::span(&item, 1), [&, keep = b](backend_reply r) mutable {
    keep.reset();
    first.set_value(r.error);
    all.done();
  });
  raw->async_check(std::span(&item, 1), [&](backend_reply) {
    later.fetch_add(1);
    all.done();
  });
  b.reset();
  EXPECT_EQ(first.get_future().get(), std::error_code{});
  EXPECT_TRUE(all.wait(2s));
  EXPECT_EQ(later.load(), 1);
}

}  // namespace
}  // namespace floodgate::test
