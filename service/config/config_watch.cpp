#include "config/config_watch.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <set>
#include <stop_token>
#include <system_error>
#include <thread>

#include "logging/log_format.hpp"

namespace floodgate::service {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

// Every change that can alter what a reload reads; IN_ATTRIB for a chmod that makes a file
// readable, the *_SELF ones for the watched directory itself going.
constexpr std::uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE |
                               IN_DELETE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;

// The directories to watch for `path`: the path when it is a directory (else its parent, where a
// file is replaced by rename), and the parent of every symlink on the way to it (where a swap of
// that symlink shows).
std::set<std::string> directories_for(const fs::path& path) {
  std::set<std::string> dirs;
  std::error_code ec;
  const auto abs = fs::absolute(path, ec);
  dirs.insert(fs::is_directory(abs, ec) ? abs.string() : abs.parent_path().string());
  fs::path prefix;
  for (const auto& part : abs) {
    prefix /= part;
    if (fs::is_symlink(prefix, ec)) dirs.insert(prefix.parent_path().string());
  }
  return dirs;
}

}  // namespace

struct config_watch::impl {
  impl(std::vector<std::string> p, std::function<void()> c, config_watch_options o)
      : paths(std::move(p)),
        changed(std::move(c)),
        options(o),
        fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "inotify_init1");
    add_watches();
    thread = std::jthread([this](std::stop_token stop) { run(stop); });
  }
  ~impl() {
    thread.request_stop();
    if (thread.joinable()) thread.join();
    ::close(fd);
  }

  // (Again after each burst: inotify_add_watch on a path now naming another directory watches
  // that one; the old one's watch goes with it, or stays harmlessly.)
  void add_watches() {
    for (const auto& p : paths)
      for (const auto& dir : directories_for(p))
        if (::inotify_add_watch(fd, dir.c_str(), mask) < 0 && !warned.contains(dir)) {
          warned.insert(dir);
          spdlog::warn("msg=\"config directory not watched\" dir={} error={}", quote(dir),
                       quote(std::error_code(errno, std::generic_category()).message()));
        }
  }

  // Reads what inotify has; true if there was anything.
  bool drain() {
    alignas(inotify_event) std::array<char, 8192> buffer;
    bool any = false;
    for (;;) {
      const auto n = ::read(fd, buffer.data(), buffer.size());
      if (n <= 0) return any;
      any = true;
    }
  }

  // Waits up to `timeout` for an event (polls in short slices to see `stop`); true on one.
  bool wait(std::chrono::milliseconds timeout, const std::stop_token& stop) {
    const auto until = clock::now() + timeout;
    while (!stop.stop_requested()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100))) > 0) return drain();
    }
    return false;
  }

  void run(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
      if (!wait(std::chrono::milliseconds(100), stop)) continue;
      // A burst: wait until it has been quiet for `quiet` (or `max_delay` passed).
      const auto first = clock::now();
      while (!stop.stop_requested() && clock::now() - first < options.max_delay &&
             wait(options.quiet, stop)) {
      }
      if (stop.stop_requested()) return;
      add_watches();
      changed();
    }
  }

  std::vector<std::string> paths;
  std::function<void()> changed;
  config_watch_options options;
  int fd;
  std::set<std::string> warned;
  std::jthread thread;  // last: started once the rest exists
};

config_watch::config_watch(std::vector<std::string> paths, std::function<void()> changed,
                           config_watch_options options)
    : impl_(std::make_unique<impl>(std::move(paths), std::move(changed), options)) {}

config_watch::~config_watch() = default;

}  // namespace floodgate::service
