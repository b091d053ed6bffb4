// Same-instant bursts from forked processes, for the exactness tests: every child gets ready
// (connects, starts its threads), then one write releases them all at once, and each reports
// one Result back through a pipe.
//
//   auto results = forked_burst<counts>(4, [&](burst_child& me) {
//     limiter l{url}; ...start threads waiting on `go`...
//     me.ready_and_wait();               // returns when every child is released
//     go = true; ...join...
//     me.report(counts{...});            // writes the result and exits the child
//   });
//   ASSERT_TRUE(results) << "a child failed";   // then sum (*results)[i]
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pipe_io.hpp"

namespace floodgate::test {

class burst_child {
 public:
  burst_child(int ready_fd, int go_fd, int result_fd)
      : ready_fd_(ready_fd), go_fd_(go_fd), result_fd_(result_fd) {}

  void ready_and_wait() const {
    char c = 'r';
    write_all(ready_fd_, &c, 1);
    if (!read_all(go_fd_, &c, 1)) ::_exit(5);  // the parent went away
  }

  template <class Result>
  [[noreturn]] void report(const Result& r) const {
    static_assert(std::is_trivially_copyable_v<Result>);
    write_all(result_fd_, &r, sizeof r);
    ::_exit(0);
  }

 private:
  int ready_fd_, go_fd_, result_fd_;
};

// Runs `child(burst_child&)` in `processes` forked processes (it must end in report());
// nullopt if a pipe failed, a child did not report, or one exited with a non-zero status.
template <class Result, class Child>
std::optional<std::vector<Result>> forked_burst(int processes, Child child) {
  int ready[2], go[2], result[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0 || ::pipe(result) != 0) return std::nullopt;
  std::vector<pid_t> pids;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      burst_child me(ready[1], go[0], result[1]);
      child(me);
      ::_exit(6);  // returned without a report
    }
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  ::close(result[1]);
  bool ok = true;
  char c;
  for (int i = 0; i < processes; ++i) ok = ok && read_all(ready[0], &c, 1);
  const std::string gos(static_cast<std::size_t>(processes), 'g');
  write_all(go[1], gos.data(), gos.size());  // every child wakes on the same write
  std::vector<Result> out(static_cast<std::size_t>(processes));
  for (auto& r : out) ok = ok && read_all(result[0], &r, sizeof r);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  for (int fd : {ready[0], go[1], result[0]}) ::close(fd);
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace floodgate::test
