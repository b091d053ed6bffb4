// Runs floodgate-bench as a child process for the smoke tests, capturing its output.
//
//   auto r = run_bench({"--redis", redis.url(), "--naive", "--burst", "20", "--json"});
//   EXPECT_EQ(r.exit_code, 0);
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "child_process.hpp"

namespace floodgate::test {

struct bench_run {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
};

// Runs to completion (at most `timeout_s`, then SIGKILL and exit_code −1).
bench_run run_bench(const std::vector<std::string>& args, int timeout_s = 60);

// Starts it with output discarded; killed when the result goes away.
child_process start_bench(const std::vector<std::string>& args);

// Processes whose parent is `pid` (read from /proc).
std::vector<pid_t> children_of(pid_t pid);
bool process_exists(pid_t pid);

}  // namespace floodgate::test
