// floodgate-bench --algorithm concurrency: the board that counts leases held across the
// bench's processes, the flags, and the tool end to end on memory:// and a real redis-server.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <initializer_list>
#include <memory>
#include <vector>

#include "bench_process.hpp"
#include "held_board.hpp"
#include "options.hpp"
#include "redis_server.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using bench::held_board;

TEST(held_board, counts_holders_across_forked_processes) {
  held_board board(3);
  board.enter(1);  // the parent holds one lease of key 1 while the child takes two more
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    board.enter(1);
    board.enter(1);
    board.leave(1);
    board.leave(1);
    board.enter(2);
    board.leave(2);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  board.leave(1);
  EXPECT_EQ(board.max_held(0), 0);
  EXPECT_EQ(board.max_held(1), 3);
  EXPECT_EQ(board.max_held(2), 1);
  EXPECT_EQ(board.max_held(), 3);
  EXPECT_EQ(board.keys_reaching(1), 2u);
  EXPECT_EQ(board.keys_reaching(3), 1u);
  EXPECT_EQ(board.keys_reaching(4), 0u);
  // Sequential holders never overlap: the maximum is 1, not their number.
  held_board one(1);
  for (int i = 0; i < 10; ++i) {
    one.enter(0);
    one.leave(0);
  }
  EXPECT_EQ(one.max_held(), 1);
}

bench::bench_options parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"floodgate-bench"};
  argv.insert(argv.end(), args);
  return bench::parse_options(static_cast<int>(argv.size()), argv.data());
}

TEST(lease_bench_options, concurrency_takes_limit_hold_and_lease) {
  using namespace std::chrono_literals;
  const auto o = parse({"--redis", "memory://", "--algorithm", "concurrency", "--limit", "7",
                        "--hold", "25ms", "--lease", "2s"});
  EXPECT_TRUE(o.concurrency);
  EXPECT_EQ(o.hold, 25ms);
  EXPECT_EQ(o.lease, 2000ms);
  EXPECT_EQ(o.make_concurrency_policy().limit(), 7);
  const auto d = parse({"--redis", "memory://", "--algorithm", "concurrency"});
  EXPECT_EQ(d.hold, 10ms);
  EXPECT_EQ(d.lease, 30000ms);
  EXPECT_EQ(parse({"--redis", "memory://", "--algorithm", "concurrency", "--hold", "0"}).hold, 0ms);
}

TEST(lease_bench_options, what_concurrency_cannot_do_is_refused) {
  for (auto args : std::vector<std::vector<const char*>>{
           {"--hold", "10ms"},                                               // without concurrency
           {"--algorithm", "concurrency", "--hold", "2s", "--lease", "1s"},  // expires held
           {"--algorithm", "concurrency", "--hold", "-1ms"},
           {"--algorithm", "concurrency", "--hold", "2h"},
           {"--algorithm", "concurrency", "--lease", "0"},
           {"--algorithm", "concurrency", "--cost", "2"},
           {"--algorithm", "concurrency", "--window", "1s"},
           {"--algorithm", "concurrency", "--rate", "100"},
           {"--algorithm", "concurrency", "--inflight", "2"},
           {"--algorithm", "concurrency", "--replay"},
           {"--algorithm", "concurrency", "--limit", "2000000"},
       }) {
    std::vector<const char*> argv{"floodgate-bench", "--redis", "memory://"};
    argv.insert(argv.end(), args.begin(), args.end());
    EXPECT_THROW(bench::parse_options(static_cast<int>(argv.size()), argv.data()),
                 bench::usage_error)
        << args.back();
  }
  EXPECT_THROW(parse({"--http", "http://127.0.0.1:1", "--algorithm", "concurrency"}),
               bench::usage_error);
}

json::object run_json(std::vector<std::string> args) {
  args.push_back("--json");
  const auto r = run_bench(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  try {
    return json::parse(r.out).as_object();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not one JSON object: " << e.what() << "\n" << r.out;
    return {};
  }
}

std::int64_t field(const json::object& o, std::string_view name) {
  const auto* v = o.if_contains(name);
  if (!v || !v->is_number()) {
    ADD_FAILURE() << "missing number " << name << " in " << json::serialize(o);
    return -1;
  }
  return v->to_number<std::int64_t>();
}

// More holders than the limit contend for each key, each holding its lease for a while, so the
// limit is reached (a test that could fail both ways: never above it, and reaching it).
void expect_limit_held_exactly(const json::object& o, std::int64_t limit, std::int64_t attempts) {
  ASSERT_TRUE(o.contains("leases") && o.at("leases").is_object()) << json::serialize(o);
  ASSERT_TRUE(o.contains("algorithm") && o.at("algorithm").is_string());
  const auto& l = o.at("leases").as_object();
  EXPECT_EQ(o.at("algorithm").as_string(), "concurrency");
  EXPECT_EQ(field(o, "errors"), 0) << json::serialize(o);
  EXPECT_EQ(field(o, "decisions"), attempts);
  EXPECT_EQ(field(l, "granted") + field(l, "refused"), attempts);
  EXPECT_GT(field(l, "refused"), 0);
  EXPECT_EQ(field(l, "released"), field(l, "granted"));
  EXPECT_EQ(field(l, "lost"), 0);
  EXPECT_EQ(field(l, "max_held"), limit);  // at most the limit, and contention reaches it
  EXPECT_EQ(field(l, "keys_over_limit"), 0);
  EXPECT_EQ(field(o, "over_admitted"), 0);
  EXPECT_GT(field(o.at("latency_us").as_object(), "max"), 0);
}

TEST(lease_bench, memory_holds_the_limit_exactly) {
  // 8 threads on one key of limit 3, 30 acquires each, every lease held 2 ms.
  const auto o = run_json({"--redis", "memory://", "--algorithm", "concurrency", "--limit", "3",
                           "--threads", "8", "--burst", "30", "--hold", "2ms", "--no-progress"});
  expect_limit_held_exactly(o, 3, 8 * 30);
  EXPECT_EQ(field(o.at("leases").as_object(), "keys_at_limit"), 1);
}

TEST(lease_bench, redis_holds_the_limit_exactly_across_processes) {
  redis_server redis;
  // 3 processes x 6 threads on 2 keys of limit 4: about 9 holders per key, each holding 3 ms
  // while the others retry at once, so each key reaches 4 holders.
  const auto o = run_json({"--redis", redis.url(), "--algorithm", "concurrency", "--limit", "4",
                           "--processes", "3", "--threads", "6", "--keys", "2", "--burst", "40",
                           "--hold", "3ms", "--no-progress"});
  expect_limit_held_exactly(o, 4, 3 * 6 * 40);
  EXPECT_EQ(field(o.at("leases").as_object(), "keys_at_limit"), 2);
}

TEST(lease_bench, text_report_names_the_holders) {
  const auto r = run_bench({"--redis", "memory://", "--algorithm", "concurrency", "--limit", "2",
                            "--threads", "4", "--burst", "10", "--hold", "1ms", "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("at most 2 at once of limit 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lost (expired) 0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace floodgate::test
