#include "nginx_process.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "redis_server.hpp"  // free_port()

namespace floodgate::test {

using namespace std::chrono_literals;

namespace {

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

nginx_process::nginx_process(std::uint16_t floodgated_port)
    : dir_(make_temp_dir("floodgate-nginx-")) {
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

  const std::string conf_path = dir_ + "/nginx.conf";
  process_ = child_process(
      {"nginx", "-p", dir_, "-c", conf_path, "-e", dir_ + "/logs/error.log", "-g", "daemon off;"});
  const auto started =
      process_.wait_ready([&] { return accepts(port_) && accepts(app_port); }, 10s);
  if (started == child_process::readiness::exited)
    throw std::runtime_error("nginx exited at start:\n" + error_log());
  if (started == child_process::readiness::timed_out)
    throw std::runtime_error("nginx did not listen within 10 s:\n" + error_log());
}

nginx_process::~nginx_process() {
  process_.signal(SIGTERM);  // fast shutdown: the master stops its workers
  if (!process_.wait_exit(5s)) process_.kill();
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
