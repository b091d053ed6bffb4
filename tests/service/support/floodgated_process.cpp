#include "floodgated_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace floodgate::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string make_temp_dir() {
  char tmpl[] = "/tmp/floodgated-test-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// Forks and execs floodgated with stdout and stderr going to `log_path`.
pid_t spawn(const std::vector<std::string>& args, const std::string& log_path,
            int max_open_files = 0) {
  std::vector<std::string> argv_s = {FLOODGATED_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (max_open_files > 0) {
      const rlimit limit{static_cast<rlim_t>(max_open_files), static_cast<rlim_t>(max_open_files)};
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

std::optional<int> wait_pid(pid_t pid, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

floodgated_process::floodgated_process(const std::string& rules_yaml, options opts)
    : dir_(make_temp_dir()),
      rules_path_(dir_ + "/rules.yaml"),
      log_path_(dir_ + "/floodgated.log") {
  write_rules(rules_yaml);
  std::vector<std::string> args = {"--config",    rules_path_,   "--listen",
                                   "127.0.0.1:0", "--log-level", opts.log_level};
  args.insert(args.end(), opts.extra_args.begin(), opts.extra_args.end());
  pid_ = spawn(args, log_path_, opts.max_open_files);
  if (!opts.wait_until_serving) return;

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto text = log();
    if (const auto at = text.find("msg=\"listening\""); at != std::string::npos) {
      const auto p = text.find(" port=", at);
      if (p != std::string::npos) {
        port_ = static_cast<std::uint16_t>(std::stoi(text.substr(p + 6)));
        return;
      }
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("floodgated exited at start:\n" + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error("floodgated did not start listening within 10 s:\n" + log());
}

floodgated_process::~floodgated_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void floodgated_process::write_rules(const std::string& yaml) const {
  // Write then rename, so a reload never reads half a file.
  const auto tmp = rules_path_ + ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << yaml;
  std::filesystem::rename(tmp, rules_path_);
}

void floodgated_process::signal(int signo) const {
  if (pid_ > 0) ::kill(pid_, signo);
}

std::optional<int> floodgated_process::wait_exit(std::chrono::milliseconds within) {
  if (pid_ <= 0) return std::nullopt;
  auto code = wait_pid(pid_, within);
  if (code) pid_ = -1;
  return code;
}

std::string floodgated_process::log() const {
  return read_file(log_path_);
}

bool floodgated_process::wait_for_log(const std::string& text, std::chrono::milliseconds within,
                                      std::size_t from) const {
  const auto deadline = std::chrono::steady_clock::now() + within;
  do {
    if (log().find(text, from) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

run_result run_floodgated(const std::vector<std::string>& args, std::chrono::milliseconds within) {
  const auto dir = make_temp_dir();
  const auto log_path = dir + "/out.log";
  const pid_t pid = spawn(args, log_path);
  run_result r;
  const auto code = wait_pid(pid, within);
  if (!code) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  r.exit_code = code.value_or(-1);
  r.output = read_file(log_path);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace floodgate::test
