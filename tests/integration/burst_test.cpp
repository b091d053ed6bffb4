// Same-millisecond bursts: several processes, each with many threads, fire at one key at the
// same instant. Every exact algorithm must admit exactly its limit: Redis runs each script
// atomically, and two requests in one millisecond are two requests.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "pipe_io.hpp"
#include "integration_support.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

constexpr int processes = 4;
constexpr int threads_per_process = 64;
constexpr int calls_per_thread = 2;
constexpr std::int64_t limit = 100;  // of 512 calls

// One child: connects, starts its threads, says ready, waits for "go", fires, reports.
[[noreturn]] void child(const std::string& url, const std::string& prefix, algorithm a,
                        const std::string& key, int ready_fd, int go_fd, int result_fd) {
  backend_options o = redis_options_for(prefix, fixed_clock());  // one millisecond for all
  o.redis.timeout = 5s;  // a burst of 256 on two cores: this is about counting, not latency
  limiter l{url, o};
  const policy p{"burst", a, limit, 1h};
  if (!wait_healthy(l.get_backend())) ::_exit(4);
  std::atomic<bool> go{false};
  std::atomic<int> admitted{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_per_process; ++t)
    threads.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < calls_per_thread; ++i) {
        const auto r = l.check(key, p);
        if (r.outcome == outcome::allowed)
          admitted.fetch_add(1);
        else if (r.outcome != outcome::over_limit)
          errors.fetch_add(1);
      }
    });
  char c = 'r';
  write_all(ready_fd, &c, 1);
  if (!read_all(go_fd, &c, 1)) ::_exit(5);
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  const int result[2] = {admitted.load(), errors.load()};
  write_all(result_fd, result, sizeof result);
  ::_exit(0);
}

struct burst_result {
  int admitted = 0;
  int errors = 0;
  bool ok = true;
};

burst_result burst(const redis_server& redis, const std::string& prefix, algorithm a,
                   const std::string& key) {
  int ready[2], go[2], result[2];
  if (::pipe(ready) || ::pipe(go) || ::pipe(result)) return {0, 0, false};
  std::vector<pid_t> pids;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) child(redis.url(), prefix, a, key, ready[1], go[0], result[1]);
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  ::close(result[1]);
  burst_result out;
  char c;
  for (int i = 0; i < processes; ++i) out.ok = out.ok && read_all(ready[0], &c, 1);
  const std::string gos(processes, 'g');
  write_all(go[1], gos.data(), gos.size());  // every child wakes on the same write
  for (int i = 0; i < processes; ++i) {
    int r[2];
    if (!read_all(result[0], r, sizeof r)) {
      out.ok = false;
      break;
    }
    out.admitted += r[0];
    out.errors += r[1];
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    out.ok = out.ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  for (int fd : {ready[0], go[1], result[0]}) ::close(fd);
  return out;
}

class burst_test : public ::testing::TestWithParam<algorithm> {};

TEST_P(burst_test, admits_exactly_the_limit) {
  redis_server redis;
  const algorithm a = GetParam();
  const auto prefix = unique_prefix("burst");
  for (int round = 0; round < 3; ++round) {
    const auto key = "hot" + std::to_string(round);
    const auto r = burst(redis, prefix, a, key);
    ASSERT_TRUE(r.ok) << "a child failed";
    EXPECT_EQ(r.errors, 0) << to_string(a) << " round " << round;
    EXPECT_EQ(r.admitted, limit) << to_string(a) << " round " << round << ": "
                                 << processes * threads_per_process * calls_per_thread << " calls";
  }
  if (a == algorithm::sliding_log) {
    EXPECT_EQ(redis.command({"ZCARD", prefix + "burst:sliding_log:{hot0}"}).integer, limit)
        << "one unique entry per admitted request";
  }
}

INSTANTIATE_TEST_SUITE_P(exact, burst_test,
                         ::testing::Values(algorithm::sliding_log, algorithm::fixed_window,
                                           algorithm::token_bucket, algorithm::gcra),
                         [](const ::testing::TestParamInfo<algorithm>& param) {
                           return std::string(to_string(param.param));
                         });

}  // namespace
}  // namespace floodgate::test
