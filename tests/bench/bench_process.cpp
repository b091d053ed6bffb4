#include "bench_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>

namespace floodgate::test {
namespace {

child_process spawn(const std::vector<std::string>& args, int out_fd, int err_fd) {
  std::vector<std::string> argv{FLOODGATE_BENCH_EXE};
  argv.insert(argv.end(), args.begin(), args.end());
  child_process::options o;
  o.out_fd = out_fd;
  o.err_fd = err_fd;
  return child_process(argv, o);
}

}  // namespace

bench_run run_bench(const std::vector<std::string>& args, int timeout_s) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  auto process = spawn(args, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);

  bench_run r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const auto n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  // Both pipes closed: it has exited or is about to. Still open: it timed out (exit_code −1,
  // and `process` kills it).
  if (open == 0) r.exit_code = process.wait_exit(std::chrono::seconds(timeout_s)).value_or(-1);
  return r;
}

child_process start_bench(const std::vector<std::string>& args) {
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  auto process = spawn(args, null, null);
  ::close(null);
  return process;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (auto* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("PPid:", 0) == 0) {
        if (std::atoi(line.c_str() + 5) == parent) out.push_back(pid);
        break;
      }
    }
  }
  ::closedir(proc);
  return out;
}

bool process_exists(pid_t pid) {
  // A zombie still "exists" for kill(0); a reaped or vanished one does not have a status file.
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
  return false;
}

}  // namespace floodgate::test
