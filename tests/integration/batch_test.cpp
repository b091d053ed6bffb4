// Batching (src/redis/batch.hpp): checks that queue on a connection while earlier calls are in
// flight go to Redis as one call of the batch script. Redis is paused (CLIENT PAUSE) while the
// checks are submitted, so batches are sure to form; what must hold is that every check is
// decided as if it had been sent alone, in order, and that each fails alone.
#include <gtest/gtest.h>

#include <thread>

#include "integration_support.hpp"
#include "info_text.hpp"
#include "redis/client.hpp"
#include "redis/resp_writer.hpp"
#include "redis/scripts.hpp"
#include "redis/url.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;


void pause(const redis_server& redis, std::chrono::milliseconds for_how_long) {
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", std::to_string(for_how_long.count())}).str, "OK");
}

struct outcome_record {
  check_result result;
  bool done = false;
};

// 600 checks over the five algorithms and three keys each, costs 0-2, submitted at once on
// one connection while Redis is paused: the Redis backend must answer each exactly as the
// memory backend deciding them one by one in submission order (same clock), and Redis must
// have seen far fewer calls than checks.
TEST(batch, queued_checks_share_calls_and_decide_as_one_by_one) {
  redis_server redis;
  backend_options o = redis_options_for(unique_prefix("batch"), fixed_clock());
  o.redis.connections = 1;
  limiter on_redis{redis.url(), o};
  ASSERT_TRUE(wait_healthy(on_redis.get_backend()));
  backend_options m;
  m.memory.clock = fixed_clock();
  limiter in_memory{"memory://", m};

  const std::vector<policy> policies = {
      {"log", algorithm::sliding_log, 40, 1min},    {"win", algorithm::sliding_window, 30, 1min},
      {"fix", algorithm::fixed_window, 50, 1min},   {"tb", algorithm::token_bucket, 20, 1min, 35},
      {"gcra", algorithm::gcra, 25, 1min, 10}};
  struct check {
    std::size_t policy;
    std::string key;
    std::int64_t cost;
  };
  std::vector<check> checks;
  for (int i = 0; i < 600; ++i)
    checks.push_back({static_cast<std::size_t>(i * 7 % 5), "k" + std::to_string(i * 13 % 3),
                      (i * 11) % 9 == 0 ? 0 : 1 + i % 2});

  const long long calls_before = script_calls(redis);
  pause(redis, 300ms);
  std::vector<outcome_record> got(checks.size());
  completion_counter counter(static_cast<int>(checks.size()));
  for (std::size_t i = 0; i < checks.size(); ++i)
    on_redis.async_check(checks[i].key, policies[checks[i].policy], checks[i].cost,
                         [&, i](check_result r) {
                           got[i] = {r, true};
                           counter.done();
                         });
  ASSERT_TRUE(counter.wait(10s));
  int allowed = 0, denied = 0;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const auto want = in_memory.check(checks[i].key, policies[checks[i].policy], checks[i].cost);
    const auto& r = got[i].result;
    ASSERT_NE(r.outcome, outcome::backend_error) << "check " << i << ": " << r.error.message();
    ASSERT_EQ(r.outcome, want.outcome) << "check " << i;
    ASSERT_EQ(r.decision, want.decision) << "check " << i;
    (r.decision.allowed ? allowed : denied) += 1;
  }
  EXPECT_GT(allowed, 100);
  EXPECT_GT(denied, 100);
  const long long calls = script_calls(redis) - calls_before;
  EXPECT_LE(calls, 20) << "600 checks took " << calls << " calls";
}

// Many threads on one key, one connection, Redis paused at the start so the first batches
// are full: exactly the limit is admitted.
TEST(batch, one_key_from_many_threads_is_exact) {
  redis_server redis;
  backend_options o = redis_options_for(unique_prefix("hot"));
  o.redis.connections = 1;
  limiter l{redis.url(), o};
  ASSERT_TRUE(wait_healthy(l.get_backend()));
  for (algorithm a : {algorithm::sliding_log, algorithm::fixed_window, algorithm::token_bucket,
                      algorithm::gcra}) {
    const policy p{"hot", a, 250, 1h};
    const long long calls_before = script_calls(redis);
    pause(redis, 100ms);
    std::atomic<int> admitted{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 32; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 20; ++i) {
          const auto r = l.check("the-key", p);
          if (r.outcome == outcome::allowed) ++admitted;
          if (r.outcome == outcome::backend_error) ++errors;
        }
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0) << to_string(a);
    EXPECT_EQ(admitted.load(), 250) << to_string(a);
    EXPECT_LT(script_calls(redis) - calls_before, 640) << to_string(a);
  }
}

// The scripts flushed before a paused burst: the lone first call and the batches behind it
// all meet NOSCRIPT, are reloaded (each script once) and decided once, none twice.
// 200 checks of a limit of 150 queued while Redis is paused after `flush`: the first goes
// alone (fixed_window's own script or function), the rest in batches; all meet the flush.
// Returns the reloads counted.
std::uint64_t burst_after(redis_server& redis, bool use_functions,
                          const std::vector<std::string>& flush) {
  backend_options o = redis_options_for(unique_prefix("noscript"), fixed_clock());
  o.redis.connections = 1;
  o.redis.use_functions = use_functions;
  limiter l{redis.url(), o};
  EXPECT_TRUE(wait_healthy(l.get_backend()));
  const policy p{"p", algorithm::fixed_window, 150, 1h};
  EXPECT_EQ(redis.command(flush).str, "OK");
  pause(redis, 200ms);
  std::atomic<int> admitted{0}, denied{0}, errors{0};
  completion_counter counter(200);
  for (int i = 0; i < 200; ++i) {
    l.async_check("k", p, 1, [&](check_result r) {
      if (r.outcome == outcome::allowed) ++admitted;
      else if (r.outcome == outcome::over_limit) ++denied;
      else ++errors;
      counter.done();
    });
    if (i == 0) std::this_thread::sleep_for(20ms);  // written alone, as fixed_window's script
  }
  EXPECT_TRUE(counter.wait(10s));
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(admitted.load(), 150);
  EXPECT_EQ(denied.load(), 50);
  return l.get_backend().stats().script_reloads;
}

TEST(batch, noscript_mid_batch_reloads_and_never_double_counts) {
  redis_server redis;
  // fixed_window's script (the lone call) and the batch script, each once however many calls
  // met NOSCRIPT.
  EXPECT_EQ(burst_after(redis, false, {"SCRIPT", "FLUSH"}), 2u);
}

TEST(batch, a_function_flush_mid_batch_reloads_the_library_once_and_never_double_counts) {
  redis_server redis;
  // The library once, and the batch script once: with the library loaded no script is
  // loaded at connect, so the batch's EVALSHA fallback meets NOSCRIPT and loads it.
  EXPECT_EQ(burst_after(redis, true, {"FUNCTION", "FLUSH"}), 2u);
  EXPECT_GT(command_stat(redis, "fcall", "failed_calls"), 0) << "the flush was met";
  EXPECT_GT(command_stat(redis, "evalsha", "calls"), 0) << "and answered as EVALSHA";
}

// A check as the Redis backend encodes it (lone EVALSHA with its batch parts), with a
// deadline of its own, recording how it ended.
class check_request final : public redis::request {
 public:
  check_request(std::string key, clock::duration timeout, std::error_code& ec,
                long long& remaining, completion_counter& counter)
      : ec_(ec), remaining_(remaining), counter_(counter) {
    const redis::script& s = redis::script_for(algorithm::fixed_window);
    script = &s;
    argument_count = 9;
    redis::append_array_header(command, argument_count);
    redis::append_bulk(command, "EVALSHA");
    redis::append_bulk(command, s.sha1);
    body_offset = command.size();
    redis::append_bulk(command, std::int64_t{1});
    part.key = static_cast<std::uint32_t>(command.size());
    redis::append_bulk(command, key);
    part.args = static_cast<std::uint32_t>(command.size());
    for (std::int64_t v : {10, 60'000, 10, 1}) redis::append_bulk(command, v);
    part.now = static_cast<std::uint32_t>(command.size());
    redis::append_bulk(command, std::string_view{});
    deadline = clock::now() + timeout;
  }
  void complete(std::error_code ec, redis::reply* r) noexcept override {
    ec_ = ec;
    // A lone check's reply (lua/single.lua): allowed, one integer (capacity 10).
    if (!ec && r != nullptr && r->kind == redis::reply::type::integer) remaining_ = r->integer % 11;
    counter_.done();
  }
  void complete_part(const decision& d) noexcept override {  // decided in a batch
    remaining_ = d.remaining;
    counter_.done();
  }

 private:
  std::error_code& ec_;
  long long& remaining_;
  completion_counter& counter_;
};

// One write in flight (Redis paused): checks queue behind it. The one whose deadline passes
// while queued fails alone with timeout; the others are answered once Redis resumes.
TEST(batch, a_queued_check_past_its_deadline_fails_alone) {
  redis_server redis;
  redis_options o;
  o.max_writes_in_flight = 1;
  o.connections = 1;
  const auto c = redis::make_client(
      redis::parse_redis_url(redis.url()), o,
      {{&redis::script_for(algorithm::fixed_window), &redis::batch_script()},
       &redis::batch_script(),
       &redis::script_library()});
  const auto prefix = unique_prefix("deadline");
  // Wait for the connection (a first check, answered).
  {
    std::error_code ec;
    long long remaining = -1;
    completion_counter ready(1);
    c->submit(std::make_unique<check_request>(prefix + "warm", 2s, ec, remaining, ready));
    ASSERT_TRUE(ready.wait(5s));
    ASSERT_EQ(remaining, 9) << ec.message();
  }
  pause(redis, 400ms);
  std::array<std::error_code, 4> ec;
  std::array<long long, 4> remaining = {-1, -1, -1, -1};
  completion_counter counter(4);
  const std::array<std::chrono::milliseconds, 4> timeouts = {3s, 3s, 100ms, 3s};
  for (std::size_t i = 0; i < 4; ++i) {
    c->submit(std::make_unique<check_request>(prefix + "k", timeouts[i], ec[i], remaining[i],
                                             counter));
    if (i == 0) std::this_thread::sleep_for(50ms);  // the first is written (and held by Redis)
  }
  ASSERT_TRUE(counter.wait(5s));
  // Decided in order, the one that timed out never ran: 9, 8, then 7 left of 10.
  EXPECT_EQ(remaining[0], 9) << ec[0].message();
  EXPECT_EQ(remaining[1], 8) << ec[1].message();
  EXPECT_EQ(ec[2], errc::timeout);
  EXPECT_EQ(remaining[2], -1);
  EXPECT_EQ(remaining[3], 7) << ec[3].message();
}

}  // namespace
}  // namespace floodgate::test
