#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace floodgate::test {
namespace {

int decode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

child_process::child_process(const std::vector<std::string>& argv, const options& o) {
  // Everything exec needs is built before fork: a threaded parent's child may not allocate.
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed for " + argv.at(0));
  if (pid_ > 0) return;
  // The child: only async-signal-safe calls until exec.
  int out = o.out_fd, err = o.err_fd;
  if (!o.output.empty()) out = err = ::open(o.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out >= 0) ::dup2(out, STDOUT_FILENO);
  if (err >= 0) ::dup2(err, STDERR_FILENO);
  if (o.max_open_files > 0) {
    const rlimit limit{static_cast<rlim_t>(o.max_open_files),
                       static_cast<rlim_t>(o.max_open_files)};
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  ::execvp(cargv[0], cargv.data());
  ::_exit(127);
}

child_process::child_process(child_process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)) {}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    kill();
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

void child_process::signal(int signo) const {
  if (pid_ > 0) ::kill(pid_, signo);
}

void child_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

child_process::readiness child_process::wait_ready(const std::function<bool()>& ready,
                                                   std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    if (pid_ <= 0) return readiness::exited;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return readiness::exited;
    }
    try {
      if (ready()) return readiness::ready;
    } catch (const std::exception&) {
    }
    if (std::chrono::steady_clock::now() > deadline) return readiness::timed_out;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::optional<int> child_process::wait_exit(std::chrono::milliseconds within) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      killed_by_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      return decode(status);
    }
    if (r < 0 || std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  return tmpl;
}

}  // namespace floodgate::test
