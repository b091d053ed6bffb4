// A child process for the test fixtures (redis-server, sentinels, nginx, floodgated,
// floodgate-bench): fork + exec with its output in a file, wait until it is ready or gone, reap
// with a deadline, and SIGKILL whatever is still running when the fixture goes away.
//
//   child_process p({"redis-server", "--port", "6390"}, {.output = dir + "/out.log"});
//   if (p.wait_ready([&] { return answers_ping(); }, 10s) != child_process::readiness::ready) ...
//   p.signal(SIGSTOP);
//   std::optional<int> code = p.wait_exit(5s);  // exit code, 128 + signal, or still running
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace floodgate::test {

class child_process {
 public:
  struct options {
    std::string output;  // file for stdout and stderr (truncated); empty: inherit
    int out_fd = -1;     // or a descriptor for stdout (and err_fd for stderr) instead
    int err_fd = -1;
    int max_open_files = 0;  // RLIMIT_NOFILE of the child; 0 leaves it
  };
  enum class readiness { ready, exited, timed_out };

  child_process() = default;  // no process
  // argv[0] is looked up in PATH unless it holds a '/'. Throws if fork fails; a failed exec
  // is an exit with 127.
  explicit child_process(const std::vector<std::string>& argv) : child_process(argv, options{}) {}
  child_process(const std::vector<std::string>& argv, const options& o);
  ~child_process() { kill(); }
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }
  void signal(int signo) const;
  // SIGKILL and reap (nothing if not running).
  void kill();
  // Polls `ready` until it says yes, the child exits (then reaped) or `within` passes.
  readiness wait_ready(const std::function<bool()>& ready, std::chrono::milliseconds within);
  // The exit code (128 + n when killed by signal n), or nullopt while it still runs after
  // `within`. Reaps it.
  std::optional<int> wait_exit(std::chrono::milliseconds within);
  // After wait_exit gave a code: the signal that killed it, or 0 if it exited by itself.
  int killed_by() const noexcept { return killed_by_; }

 private:
  pid_t pid_ = -1;
  int killed_by_ = 0;
};

std::string read_file(const std::string& path);
// A fresh directory under /tmp whose name starts with `prefix`.
std::string make_temp_dir(const std::string& prefix);

}  // namespace floodgate::test
