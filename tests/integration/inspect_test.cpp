// floodgate/inspect.hpp on a real redis-server (plain and TLS): a key's raw state as each
// algorithm stores it, the node's INFO and TIME, what a URL without Redis answers, a node that
// is down, and stop() ending a question that waits.
#include "floodgate/inspect.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "integration_support.hpp"
#include "redis/scripts.hpp"
#include "tls_redis.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

std::string node_of(std::uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

// Every algorithm's state, after 3 checks, read as Redis has it: the key the backend wrote
// (with the URL's key_prefix), its type, value and TTL.
TEST(inspect_api, reads_each_algorithms_state_as_redis_stores_it) {
  redis_server redis;
  // A deadline for a loaded machine's first call (connect, SCRIPT LOAD), not the 50 ms default.
  const auto url = redis.url() + "?key_prefix=insp:&timeout=2s";
  limiter l{url};
  redis_inspector r{url};
  EXPECT_TRUE(r.names_redis());
  EXPECT_EQ(r.why_not(), "");
  for (const auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                       algorithm::token_bucket, algorithm::gcra}) {
    const policy p{"api", a, 10, 60s};
    const std::string key = "user-" + std::string(to_string(a));
    SCOPED_TRACE(key);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(l.check(key, p).outcome, outcome::allowed);
    const auto s = r.read_state(p, key);
    ASSERT_EQ(s.error, "");
    EXPECT_TRUE(s.readable);
    EXPECT_EQ(s.node, node_of(redis.port()));
    EXPECT_EQ(s.redis_key.rfind("insp:api:", 0), 0u) << s.redis_key;
    EXPECT_EQ(redis.command({"EXISTS", s.redis_key}).integer, 1) << s.redis_key;
    EXPECT_EQ(s.type, redis.command({"TYPE", s.redis_key}).str);
    EXPECT_NE(s.value, "");
    const auto pttl = redis.command({"PTTL", s.redis_key}).integer;
    EXPECT_GT(s.ttl_ms, 0);
    EXPECT_GE(s.ttl_ms, pttl);  // read before it
    if (a == algorithm::sliding_log) {
      EXPECT_EQ(s.type, "zset");
      EXPECT_EQ(s.members, redis.command({"ZCARD", s.redis_key}).integer);
      EXPECT_GT(s.members, 0);
    } else {
      EXPECT_EQ(s.members, -1);
    }
  }
}

TEST(inspect_api, a_key_never_checked_reads_as_none) {
  redis_server redis;
  const auto s = read_raw_state(redis.url(), policy{"api", algorithm::gcra, 10, 60s}, "nobody", 1s);
  EXPECT_EQ(s.error, "");
  EXPECT_EQ(s.node, node_of(redis.port()));
  EXPECT_EQ(s.type, "none");
  EXPECT_EQ(s.value, "");
  EXPECT_EQ(s.ttl_ms, -2);
}

// The URL's own node; its INFO (commandstats counting floodgate's script calls) and its clock,
// which on this host is this host's.
TEST(inspect_api, asks_the_node_info_and_time) {
  redis_server redis;
  limiter l{redis.url() + "?timeout=2s"};
  ASSERT_EQ(l.check("k", policy{"api", algorithm::gcra, 10, 60s}).outcome, outcome::allowed);
  redis_inspector r{redis.url()};
  const auto nodes = r.nodes();
  EXPECT_EQ(nodes.error, "");
  ASSERT_EQ(nodes.nodes, std::vector<std::string>{node_of(redis.port())});
  const auto all = r.info(nodes.nodes[0]);
  EXPECT_EQ(all.error, "");
  EXPECT_NE(all.text.find("redis_version:"), std::string::npos);
  EXPECT_NE(all.text.find("cmdstat_fcall:calls="), std::string::npos) << all.text;
  const auto server = r.info(nodes.nodes[0], "server");
  EXPECT_NE(server.text.find("redis_version:"), std::string::npos);
  EXPECT_EQ(server.text.find("cmdstat_"), std::string::npos);

  const auto before = std::chrono::system_clock::now().time_since_epoch();
  const auto t = r.time(nodes.nodes[0]);
  const auto after = std::chrono::system_clock::now().time_since_epoch();
  EXPECT_EQ(t.error, "");
  // Same host, same clock: within the call, give or take the clocks' granularity.
  EXPECT_GE(t.since_epoch, std::chrono::duration_cast<std::chrono::microseconds>(before) - 1ms);
  EXPECT_LE(t.since_epoch, std::chrono::duration_cast<std::chrono::microseconds>(after) + 1ms);

  const auto stranger = r.time("127.0.0.1:1");
  EXPECT_NE(stranger.error.find("not a node of this URL"), std::string::npos) << stranger.error;
}

TEST(inspect_api, a_url_without_redis_says_why) {
  redis_inspector memory{"memory://"};
  EXPECT_FALSE(memory.names_redis());
  EXPECT_NE(memory.why_not().find("memory://"), std::string::npos);
  EXPECT_TRUE(memory.nodes().nodes.empty());
  const auto m = memory.read_state(policy{"api", algorithm::gcra, 10, 60s}, "k");
  EXPECT_FALSE(m.readable);
  EXPECT_EQ(m.why_not, memory.why_not());

  redis_inspector other{"http://127.0.0.1:80"};
  EXPECT_FALSE(other.names_redis());
  EXPECT_EQ(other.why_not(), "not a Redis URL: http://127.0.0.1:80");

  // A Redis URL the backend refuses: readable, and the error is the backend's own, password
  // masked.
  redis_inspector bad{"redis://:s3cret@127.0.0.1:6379?timeout=soon"};
  EXPECT_TRUE(bad.names_redis());
  EXPECT_NE(bad.why_not().find("timeout"), std::string::npos) << bad.why_not();
  EXPECT_EQ(bad.why_not().find("s3cret"), std::string::npos) << bad.why_not();
  const auto b = bad.read_state(policy{"api", algorithm::gcra, 10, 60s}, "k");
  EXPECT_TRUE(b.readable);
  EXPECT_EQ(b.error, bad.why_not());
  EXPECT_TRUE(bad.nodes().nodes.empty());
  EXPECT_EQ(bad.info("127.0.0.1:6379").error, bad.why_not());
}

TEST(inspect_api, a_node_that_is_down_is_named_in_the_error) {
  const auto port = free_port();  // nothing listens: refused at once
  redis_inspector r{"redis://127.0.0.1:" + std::to_string(port), 1s};
  const auto s = r.read_state(policy{"api", algorithm::gcra, 10, 60s}, "k");
  EXPECT_TRUE(s.readable);
  EXPECT_NE(s.error.find(node_of(port) + ": "), std::string::npos) << s.error;
  EXPECT_EQ(s.node, "");
  const auto info = r.info(node_of(port));
  EXPECT_NE(info.error.find(node_of(port) + ": "), std::string::npos) << info.error;
}

// A node that never answers (SIGSTOP): the question waits for its timeout, and stop() from
// another thread ends it at once, and every later one.
TEST(inspect_api, stop_ends_a_question_that_waits) {
  redis_server redis;
  redis_inspector r{redis.url(), 30s};
  const auto node = node_of(redis.port());
  ASSERT_EQ(r.info(node).error, "");  // connected
  redis.pause();
  const auto start = std::chrono::steady_clock::now();
  auto asked = std::async(std::launch::async, [&] { return r.time(node); });
  // Give the question time to be on its way: it waits for an answer that cannot come.
  ASSERT_EQ(asked.wait_for(200ms), std::future_status::timeout);
  r.stop();
  ASSERT_EQ(asked.wait_for(10s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // far under the 30 s timeout
  EXPECT_NE(asked.get().error.find("stopped"), std::string::npos);
  EXPECT_NE(r.info(node).error.find("stopped"), std::string::npos);
  redis.resume();
}

TEST(inspect_api, reads_over_tls) {
  tls_redis t;
  const auto url = t.url(t.certs.client_query() + "&timeout=2s");
  limiter l{url};
  const policy p{"api", algorithm::sliding_log, 10, 60s};
  ASSERT_EQ(l.check("alice", p).outcome, outcome::allowed);
  redis_inspector r{url};
  const auto s = r.read_state(p, "alice");
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.node, node_of(t.tls_port));
  EXPECT_EQ(s.type, "zset");
  EXPECT_EQ(s.members, 1);  // one admission, one entry
  EXPECT_EQ(r.info(node_of(t.tls_port)).error, "");
}

TEST(inspect_api, printable_escapes_what_a_terminal_would_not_show) {
  EXPECT_EQ(printable("user-1"), "user-1");
  EXPECT_EQ(printable(std::string("a\x01\\b\xff", 5)), "a\\x01\\x5cb\\xff");
}

TEST(inspect_api, script_source_is_the_text_the_backend_loads) {
  for (const auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                       algorithm::token_bucket, algorithm::gcra})
    EXPECT_EQ(script_source(a), redis::script_for(a).source) << to_string(a);
}

}  // namespace
}  // namespace floodgate::test
