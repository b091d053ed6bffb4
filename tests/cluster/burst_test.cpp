// Same-millisecond bursts on a cluster: forked processes, each with many threads, fire at
// keys on all three masters at the same instant. Every exact algorithm must admit exactly its
// limit per key: each key's scripts run one at a time on its master.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_support.hpp"
#include "pipe_io.hpp"

namespace floodgate::test {
namespace {

constexpr int processes = 2;
constexpr int threads_per_process = 32;
constexpr int rounds = 2;           // each thread checks every key this many times
constexpr std::int64_t limit = 50;  // of processes * threads * rounds = 128 calls per key
constexpr std::int64_t fixed_ms = 1'800'000'000'000;

struct counts {
  int admitted[3] = {0, 0, 0};
  int errors = 0;
};

[[noreturn]] void child(const std::string& url, const std::string& prefix, algorithm a,
                        const std::vector<std::string>& keys, int ready_fd, int go_fd,
                        int result_fd) {
  backend_options o;
  o.redis.key_prefix = prefix;
  o.redis.test_clock = [] { return std::chrono::milliseconds(fixed_ms); };  // one millisecond
  o.redis.timeout = 5s;
  limiter l{url, o};
  const policy p{"burst", a, limit, 1h};
  if (!wait_healthy(l.get_backend())) ::_exit(4);
  std::atomic<bool> go{false};
  std::atomic<int> admitted[3] = {0, 0, 0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_per_process; ++t)
    threads.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < rounds * 3; ++i) {
        const int k = (t + i) % 3;
        const auto r = l.check(keys[static_cast<std::size_t>(k)], p);
        if (r.outcome == outcome::allowed)
          admitted[k].fetch_add(1);
        else if (r.outcome != outcome::over_limit)
          errors.fetch_add(1);
      }
    });
  char c = 'r';
  write_all(ready_fd, &c, 1);
  if (!read_all(go_fd, &c, 1)) ::_exit(5);
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  counts out;
  for (int k = 0; k < 3; ++k) out.admitted[k] = admitted[k].load();
  out.errors = errors.load();
  write_all(result_fd, &out, sizeof out);
  ::_exit(0);
}

class cluster_burst : public ::testing::TestWithParam<algorithm> {};

TEST_P(cluster_burst, admits_exactly_the_limit_on_every_master) {
  auto& c = shared_cluster();
  const algorithm a = GetParam();
  const auto prefix = unique_prefix("burst");
  std::vector<std::string> keys;
  for (int m : c.masters()) keys.push_back(key_on(c, m, "hot"));
  ASSERT_EQ(keys.size(), 3u);

  int ready[2], go[2], result[2];
  ASSERT_EQ(::pipe(ready) | ::pipe(go) | ::pipe(result), 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) child(c.url(), prefix, a, keys, ready[1], go[0], result[1]);
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  ::close(result[1]);
  char ch;
  for (int i = 0; i < processes; ++i) ASSERT_TRUE(read_all(ready[0], &ch, 1));
  const std::string gos(processes, 'g');
  write_all(go[1], gos.data(), gos.size());
  counts total;
  for (int i = 0; i < processes; ++i) {
    counts r;
    ASSERT_TRUE(read_all(result[0], &r, sizeof r));
    for (int k = 0; k < 3; ++k) total.admitted[k] += r.admitted[k];
    total.errors += r.errors;
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  for (int fd : {ready[0], go[1], result[0]}) ::close(fd);
  EXPECT_EQ(total.errors, 0);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(total.admitted[k], limit)
        << to_string(a) << " key " << keys[static_cast<std::size_t>(k)];
}

INSTANTIATE_TEST_SUITE_P(exact, cluster_burst,
                         ::testing::Values(algorithm::sliding_log, algorithm::fixed_window,
                                           algorithm::token_bucket, algorithm::gcra),
                         [](const ::testing::TestParamInfo<algorithm>& param) {
                           return std::string(to_string(param.param));
                         });

}  // namespace
}  // namespace floodgate::test
