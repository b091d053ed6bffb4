#include "nginx_process.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "redis_server.hpp"  // free_port()

namespace floodgate::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  std::size_t n = 0;
  for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
    ++n;
  }
  if (n == 0) throw std::runtime_error("examples/nginx.conf no longer mentions " + from);
}

bool accepts(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

nginx_process::nginx_process(std::uint16_t floodgated_port) {
  char tmpl[] = "/tmp/floodgate-nginx-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  std::filesystem::create_directories(dir_ + "/logs");
  // A free port can be taken before nginx binds it: try a few.
  for (int attempt = 0;; ++attempt) {
    try {
      start(floodgated_port);
      return;
    } catch (const std::exception&) {
      if (attempt == 4) throw;
    }
  }
}

void nginx_process::start(std::uint16_t floodgated_port) {
  port_ = free_port();
  const auto app_port = free_port();
  std::string conf = read_file(FLOODGATE_SOURCE_DIR "/examples/nginx.conf");
  replace_all(conf, "127.0.0.1:8080", "127.0.0.1:" + std::to_string(floodgated_port));
  replace_all(conf, "127.0.0.1:8000", "127.0.0.1:" + std::to_string(port_));
  replace_all(conf, "127.0.0.1:9000", "127.0.0.1:" + std::to_string(app_port));
  std::ofstream(dir_ + "/nginx.conf") << conf;
  std::filesystem::remove(dir_ + "/logs/app_access.log");

  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    const std::string conf_path = dir_ + "/nginx.conf";
    const std::string err = dir_ + "/logs/error.log";
    ::execlp("nginx", "nginx", "-p", dir_.c_str(), "-c", conf_path.c_str(), "-e", err.c_str(), "-g",
             "daemon off;", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("nginx exited at start:\n" + error_log());
    }
    if (accepts(port_) && accepts(app_port)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("nginx did not listen within 10 s:\n" + error_log());
}

nginx_process::~nginx_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);  // fast shutdown; the master stops its workers
    bool exited = false;
    for (int i = 0; i < 500 && !exited; ++i) {
      exited = ::waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::size_t nginx_process::app_hits(std::size_t expected) const {
  auto count = [this] {
    const auto log = read_file(dir_ + "/logs/app_access.log");
    return static_cast<std::size_t>(std::count(log.begin(), log.end(), '\n'));
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (count() < expected && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return count();
}

std::string nginx_process::error_log() const {
  return read_file(dir_ + "/logs/error.log");
}

}  // namespace floodgate::test
