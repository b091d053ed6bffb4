// Failures a real Redis will not produce on demand, from a fake server: malformed and
// over-deep replies, replies in one-byte pieces, extra replies, NOSCRIPT that will not go
// away, refused handshakes, silent servers, and servers that hang up at once (backoff).
#include "fake_redis.hpp"

#include <gtest/gtest.h>

#include "integration_support.hpp"
#include "redis/scripts.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

const policy p{"p", algorithm::gcra, 10, 1s};
// A lone check allowed (lua/single.lua): remaining 9 + (capacity 10 + 1) x reset_after 100.
const std::string good_reply = ":1109\r\n";

bool is_function_load(const fake_redis::command& c) {
  return c.size() == 3 && c[0] == "FUNCTION" && c[1] == "LOAD";
}

// FUNCTION LOAD as a server that has no functions answers it: calls go as EVALSHA.
const std::string no_functions = "-ERR unknown command 'FUNCTION'\r\n";

// A fake that handles the handshake and answers every script call with `reply`.
fake_redis::responder answering(std::string reply) {
  return [reply](const fake_redis::command& c) {
    if (is_function_load(c)) return no_functions;
    return fake_redis::is_script_load(c) ? fake_redis::sha_reply(c) : reply;
  };
}

// A deadline that covers a first call waiting for the handshake on a loaded machine: these
// tests are about replies, not deadlines.
backend_options patient() {
  backend_options o;
  o.redis.timeout = 2s;
  return o;
}

check_result check_once(const std::string& url, backend_options o = patient()) {
  limiter l{url, o};
  return l.check("k", p);
}

TEST(fake_redis, a_good_reply_is_a_decision) {
  fake_redis fake(answering(good_reply));
  const auto r = check_once(fake.url());
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_EQ(r.decision.limit, 10);
  EXPECT_EQ(r.decision.remaining, 9);
  EXPECT_EQ(r.decision.reset_after, 100ms);
}

TEST(fake_redis, malformed_replies_are_protocol_errors) {
  std::string deep;
  for (int i = 0; i < 9; ++i) deep += "*1\r\n";
  deep += ":1\r\n";
  for (const std::string& bad :
       {std::string("?garbage\r\n"), deep, std::string("*5\r\n:1\r\n:10\r\n%9\r\n")}) {
    fake_redis fake(answering(bad));
    const auto r = check_once(fake.url());
    EXPECT_EQ(r.outcome, outcome::backend_error) << bad;
    EXPECT_EQ(r.error, errc::protocol_error) << bad << ": " << r.error.message();
  }
}

TEST(fake_redis, well_formed_replies_of_the_wrong_shape_are_protocol_errors) {
  for (const std::string& bad :
       {"*4\r\n:1\r\n:10\r\n:9\r\n:0\r\n"s, "*5\r\n:2\r\n:10\r\n:9\r\n:0\r\n:0\r\n"s,
        "*5\r\n:1\r\n:10\r\n:-9\r\n:0\r\n:0\r\n"s, "*5\r\n:0\r\n:10\r\n:9\r\n:0\r\n:-2\r\n"s,
        "*5\r\n:1\r\n$2\r\n10\r\n:9\r\n:0\r\n:0\r\n"s, ":-1\r\n"s, "*2\r\n:-1\r\n:0\r\n"s,
        "*3\r\n:1\r\n:0\r\n:0\r\n"s, "*3\r\n:-1\r\n:0\r\n:-2\r\n"s, "*1\r\n:1\r\n"s, "+OK\r\n"s,
        "$-1\r\n"s}) {
    fake_redis fake(answering(bad));
    const auto r = check_once(fake.url());
    EXPECT_EQ(r.error, errc::protocol_error) << bad;
  }
}

TEST(fake_redis, error_replies_map_to_codes) {
  const std::pair<std::string, errc> cases[] = {
      {"-BUSY Redis is busy running a script.\r\n", errc::server_busy},
      {"-OOM command not allowed when used memory > 'maxmemory'.\r\n", errc::out_of_memory},
      {"-ERR floodgate: bad cost\r\n", errc::server_error},
      {"-READONLY You can't write against a read only replica.\r\n", errc::server_error},
      {"-\r\n", errc::server_error},
  };
  for (const auto& [reply, code] : cases) {
    fake_redis fake(answering(reply));
    EXPECT_EQ(check_once(fake.url()).error, code) << reply;
  }
}

TEST(fake_redis, a_reply_in_one_byte_pieces) {
  fake_redis::options o;
  o.byte_delay = 300us;  // ~30 bytes: ~10 ms, well inside the deadline
  fake_redis fake(answering(good_reply), o);
  backend_options bo;
  bo.redis.connect_timeout = 5s;  // the handshake's SCRIPT LOAD replies come slowly too
  bo.redis.timeout = 2s;
  const auto r = check_once(fake.url(), bo);
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  EXPECT_EQ(r.decision.remaining, 9);
}

TEST(fake_redis, noscript_is_retried_after_script_load_then_as_eval) {
  // NOSCRIPT to every EVALSHA (as if flushed between each load and retry): the third try
  // carries the source itself.
  fake_redis fake([](const fake_redis::command& c) -> std::string {
    if (fake_redis::is_script_load(c)) return fake_redis::sha_reply(c);
    if (is_function_load(c)) return no_functions;
    if (c[0] == "EVALSHA") return "-NOSCRIPT No matching script. Please use EVAL.\r\n";
    return good_reply;
  });
  backend_options o = patient();
  o.redis.connections = 1;
  const auto r = check_once(fake.url(), o);
  ASSERT_EQ(r.outcome, outcome::allowed) << r.error.message();
  std::vector<std::string> calls;
  const auto all = fake.commands();
  // After the handshake's HELLO, FUNCTION LOAD (refused) and then SCRIPT LOAD of every script.
  ASSERT_GE(all.size(), 2u);
  EXPECT_TRUE(is_function_load(all[1]));
  std::size_t first = 2;
  while (first < all.size() && fake_redis::is_script_load(all[first])) ++first;
  EXPECT_EQ(first, 13u) << "HELLO, FUNCTION LOAD and eleven SCRIPT LOADs";
  for (std::size_t i = first; i < all.size(); ++i)
    calls.push_back(fake_redis::is_script_load(all[i]) ? "SCRIPT LOAD" : all[i][0]);
  EXPECT_EQ(calls, (std::vector<std::string>{"EVALSHA", "SCRIPT LOAD", "EVALSHA", "EVAL"}));
  // The EVAL carries the same arguments after the script.
  const auto& evalsha = all[all.size() - 2];
  const auto& eval = all.back();
  ASSERT_EQ(eval.size(), evalsha.size());
  EXPECT_TRUE(eval[1].starts_with("#!lua"));
  EXPECT_EQ(std::vector<std::string>(eval.begin() + 2, eval.end()),
            std::vector<std::string>(evalsha.begin() + 2, evalsha.end()));
}

// A server that loaded the library, then lost it (FUNCTION FLUSH): the FCALL did not run, so
// it goes again as EVALSHA at once, while the library is loaded again; the next call is FCALL.
TEST(fake_redis, a_missing_function_is_retried_as_evalsha_and_the_library_reloaded) {
  const auto& lib = redis::script_library();
  const std::string lib_reply =
      "$" + std::to_string(lib.name.size()) + "\r\n" + std::string(lib.name) + "\r\n";
  std::atomic<int> fcalls{0};
  fake_redis fake([&](const fake_redis::command& c) -> std::string {
    if (fake_redis::is_script_load(c)) return fake_redis::sha_reply(c);
    if (is_function_load(c)) return lib_reply;
    if (c[0] == "FCALL" && fcalls++ == 0) return "-ERR Function not found\r\n";
    return good_reply;
  });
  backend_options o = patient();
  o.redis.connections = 1;
  o.redis.max_batch_items = 1;
  limiter l{fake.url(), o};
  for (int i = 0; i < 2; ++i) {
    const auto r = l.check("k", p);
    ASSERT_EQ(r.outcome, outcome::allowed) << i << ": " << r.error.message();
  }
  std::vector<std::string> calls;
  const auto all = fake.commands();
  for (std::size_t i = 2; i < all.size(); ++i)
    if (!fake_redis::is_script_load(all[i]))
      calls.push_back(is_function_load(all[i]) ? "FUNCTION LOAD" : all[i][0]);
  EXPECT_EQ(calls, (std::vector<std::string>{"FCALL", "FUNCTION LOAD", "EVALSHA", "FCALL"}));
  EXPECT_EQ(l.get_backend().stats().script_reloads, 1u);
  // FCALL names the function and carries EVALSHA's arguments after it.
  const auto& fcall = all.back();
  const auto& evalsha = all[all.size() - 2];
  EXPECT_EQ(fcall[1], redis::script_for(algorithm::gcra).function);
  EXPECT_EQ(std::vector<std::string>(fcall.begin() + 2, fcall.end()),
            std::vector<std::string>(evalsha.begin() + 2, evalsha.end()));
}

// A server that loads the library: calls go as FCALL, so the greeting loads no scripts (a
// call sent as EVALSHA later loads its own after NOSCRIPT).
TEST(fake_redis, a_loaded_library_needs_no_script_loads) {
  const auto& lib = redis::script_library();
  const std::string lib_reply =
      "$" + std::to_string(lib.name.size()) + "\r\n" + std::string(lib.name) + "\r\n";
  fake_redis fake([&](const fake_redis::command& c) -> std::string {
    if (fake_redis::is_script_load(c)) return fake_redis::sha_reply(c);
    if (is_function_load(c)) return lib_reply;
    return good_reply;
  });
  backend_options o = patient();
  o.redis.connections = 1;
  ASSERT_EQ(check_once(fake.url(), o).outcome, outcome::allowed);
  std::vector<std::string> sent;
  for (const auto& c : fake.commands())
    sent.push_back(is_function_load(c)           ? "FUNCTION LOAD"
                   : fake_redis::is_script_load(c) ? "SCRIPT LOAD"
                                                   : c[0]);
  EXPECT_EQ(sent, (std::vector<std::string>{"HELLO", "FUNCTION LOAD", "FCALL"}));
}

TEST(fake_redis, noscript_forever_is_an_error_not_a_loop) {
  fake_redis fake([](const fake_redis::command& c) -> std::string {
    if (fake_redis::is_script_load(c)) return fake_redis::sha_reply(c);
    return "-NOSCRIPT No matching script.\r\n";
  });
  const auto r = check_once(fake.url());
  EXPECT_EQ(r.error, errc::server_error) << r.error.message();
}

TEST(fake_redis, a_reply_nobody_asked_for_drops_the_connection) {
  fake_redis fake(answering(good_reply + good_reply));  // one call, two replies
  backend_options o;
  o.redis.connections = 1;
  limiter l{fake.url(), o};
  EXPECT_EQ(l.check("k", p).outcome, outcome::allowed);
  // The stray reply cost the connection; the next call gets a new one (and its own reply).
  check_result r;
  for (int i = 0; i < 100 && r.outcome != outcome::allowed; ++i) r = l.check("k", p);
  EXPECT_EQ(r.outcome, outcome::allowed);
  EXPECT_GE(fake.accepted(), 2);
}

TEST(fake_redis, a_refused_handshake_fails_fast_with_not_connected) {
  fake_redis fake(
      [](const fake_redis::command&) { return std::string("-NOPERM no scripts for you\r\n"); });
  backend_options o;
  o.redis.timeout = 2s;
  limiter l{fake.url(), o};
  const auto start = std::chrono::steady_clock::now();
  const auto r = l.check("k", p);
  EXPECT_EQ(r.error, errc::not_connected) << r.error.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms * timing_factor);
  EXPECT_FALSE(l.get_backend().healthy());
}

TEST(fake_redis, a_silent_server_costs_the_deadline_then_connect_timeout_retries) {
  fake_redis fake([](const fake_redis::command&) { return std::string(); });
  backend_options o;
  o.redis.connections = 1;
  o.redis.connect_timeout = 100ms;
  limiter l{fake.url(), o};
  const auto start = std::chrono::steady_clock::now();
  const auto r = l.check("k", p);
  const auto took = std::chrono::steady_clock::now() - start;
  // The call's deadline (50 ms, the default) fires before the handshake's connect_timeout
  // (100 ms): a timeout, not not_connected, and never before the deadline. The upper bound
  // only says it did not hang (a loaded machine may run the timer late).
  EXPECT_EQ(r.error, errc::timeout) << r.error.message();
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 1s * timing_factor);
  // Then a new connection after each connect_timeout (plus backoff): a third one comes.
  for (auto until = std::chrono::steady_clock::now() + 5s * timing_factor;
       fake.accepted() < 3 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(10ms);
  EXPECT_GE(fake.accepted(), 3) << "the silent connection was never replaced";
}

TEST(fake_redis, reconnects_back_off_exponentially) {
  fake_redis::options fo;
  fo.close_at_once = true;
  fake_redis fake(answering(good_reply), fo);
  backend_options o;
  o.redis.connections = 2;
  o.redis.reconnect_backoff_min = 10ms;
  o.redis.reconnect_backoff_max = 80ms;
  o.redis.timeout = 5s;
  {
    limiter l{fake.url(), o};
    std::this_thread::sleep_for(1s);
    // Calls meanwhile fail fast rather than wait for their (5 s) deadline.
    const auto start = std::chrono::steady_clock::now();
    const auto r = l.check("k", p);
    EXPECT_EQ(r.outcome, outcome::backend_error);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  }
  // Per connection: waits of ~10, 20, 40, then ~80 ms (±50%): about 15 attempts a second,
  // not the thousands an immediate retry would make. The first four waits sum to at most
  // 225 ms, so even timers running three times late give each connection four attempts.
  const int attempts = fake.accepted();
  std::cout << attempts << " connection attempts in 1 s over 2 connections\n";
  EXPECT_GE(attempts, 2 * 4);
  EXPECT_LE(attempts, 2 * 40);
}

}  // namespace
}  // namespace floodgate::test

namespace floodgate::test {
namespace {

// A Sentinel set-up whose primary keeps answering READONLY: the call is parked until a new
// primary is known, and fails with timeout at its deadline on the resolver thread. The
// handler drops the last owner of the backend right there; it must be destroyed cleanly
// (not join its own thread and terminate).
TEST(fake_redis, a_sentinel_backend_may_be_dropped_inside_a_completion_on_its_own_thread) {
  fake_redis primary([](const fake_redis::command& c) -> std::string {
    if (fake_redis::is_script_load(c)) return fake_redis::sha_reply(c);
    return "-READONLY You can't write against a read only replica.\r\n";
  });
  const std::string port = std::to_string(primary.port());
  fake_redis sentinel([&port](const fake_redis::command& c) -> std::string {
    // An old sentinel: SENTINEL MASTER unknown, so the client asks for the address.
    if (c.size() == 3 && c[0] == "SENTINEL" && c[1] == "get-master-addr-by-name")
      return "*2\r\n$9\r\n127.0.0.1\r\n$" + std::to_string(port.size()) + "\r\n" + port + "\r\n";
    return "-ERR unknown subcommand\r\n";
  });
  backend_options o;
  o.redis.timeout = 300ms;
  auto b = make_backend(
      "redis+sentinel://127.0.0.1:" + std::to_string(sentinel.port()) + "/mymaster", o);
  ASSERT_TRUE(wait_healthy(*b));
  std::atomic<bool> done{false};
  std::error_code error;
  const check_item item{"k", &p, 1};
  b->async_check(std::span(&item, 1), [&](backend_reply r) {
    error = r.error;
    b.reset();  // the last owner, on whichever thread completes the call
    done.store(true);
    done.notify_one();
  });
  done.wait(false);
  EXPECT_EQ(error, errc::timeout) << error.message();
  std::this_thread::sleep_for(100ms);  // the resolver thread winds down with the backend
}

}  // namespace
}  // namespace floodgate::test
