#include "supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "channel.hpp"
#include "clock.hpp"
#include "worker.hpp"

namespace floodgate::bench {
namespace {

volatile std::sig_atomic_t stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  stop_signal = sig;
}

// Without SA_RESTART, so poll() returns at once with EINTR.
void set_stop_handlers(bool ours) {
  struct sigaction sa {};
  sa.sa_handler = ours ? on_stop_signal : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::string make_run_id() {
  std::random_device rd;
  const auto v = (std::uint64_t{rd()} << 32 | rd()) ^ static_cast<std::uint64_t>(now_us());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(v & 0xffffffffu));
  return buf;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + ::strsignal(WTERMSIG(status));
  return "stopped";
}

struct child {
  pid_t pid = -1;
  int up = -1;    // worker → parent (we read)
  int down = -1;  // parent → worker (we write)
  frame_reader reader;
  bool ready = false;
  bool has_result = false;
  bool eof = false;
  std::uint64_t answered = 0;
  run_result result;
};

// Owns the workers: whatever way supervise() leaves, none is left running or unreaped.
class crew {
 public:
  ~crew() {
    for (auto& c : children_) {
      if (c.up >= 0) ::close(c.up);
      if (c.down >= 0) ::close(c.down);
      if (c.pid > 0) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
      }
    }
    set_stop_handlers(false);
  }

  std::vector<child>& children() { return children_; }

  // Waits for workers that have sent their result and are exiting; kills any still there
  // after a grace period.
  void reap_all() {
    const auto deadline = now_us() + 5'000'000;
    for (auto& c : children_) {
      while (c.pid > 0 && ::waitpid(c.pid, nullptr, WNOHANG) == 0) {
        if (now_us() > deadline) ::kill(c.pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      c.pid = -1;
    }
  }

  void spawn(const bench_options& opts, const std::string& run_id, held_board* held) {
    const pid_t parent = ::getpid();
    children_.resize(opts.processes);
    for (std::size_t i = 0; i < opts.processes; ++i) {
      int up[2], down[2];
      if (::pipe2(up, O_CLOEXEC) != 0 || ::pipe2(down, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
      if (pid == 0) {
        // The worker dies with the parent, even if the parent died before this line.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);
        set_stop_handlers(false);
        for (std::size_t j = 0; j < i; ++j) {
          ::close(children_[j].up);
          ::close(children_[j].down);
        }
        ::close(up[0]);
        ::close(down[1]);
        // _exit: the parent's buffered output and static objects are not the worker's.
        ::_exit(run_worker_process(opts, i, run_id, up[1], down[0], held));
      }
      ::close(up[1]);
      ::close(down[0]);
      children_[i].pid = pid;
      children_[i].up = up[0];
      children_[i].down = down[1];
    }
  }

  // Reaps a worker that closed its pipe; returns how it ended.
  std::string reap(child& c) {
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    c.pid = -1;
    return describe_status(status);
  }

 private:
  std::vector<child> children_;
};

}  // namespace

run_result supervise(const bench_options& opts, const progress_fn& progress, held_board* held) {
  stop_signal = 0;
  set_stop_handlers(true);
  ::signal(SIGPIPE, SIG_IGN);  // a dead worker's pipe: write() fails, the loop reports it

  crew workers;
  workers.spawn(opts, make_run_id(), held);
  auto& children = workers.children();

  const auto connect_deadline = now_us() + 30'000'000;
  std::int64_t start_us = 0;
  std::size_t ready = 0, done = 0;
  const double planned =
      opts.is_burst() ? static_cast<double>(opts.workers() * *opts.burst)
                      : static_cast<double>(std::chrono::microseconds(opts.duration).count());

  while (done < children.size()) {
    if (stop_signal) throw interrupted(std::string("stopped by ") + ::strsignal(stop_signal));
    if (start_us == 0 && now_us() > connect_deadline)
      throw std::runtime_error("the workers did not connect within 30 s");

    std::vector<pollfd> fds;
    std::vector<std::size_t> owner;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].eof) continue;
      fds.push_back({children[i].up, POLLIN, 0});
      owner.push_back(i);
    }
    const int n = ::poll(fds.data(), fds.size(), 100);
    if (n < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));

    for (std::size_t k = 0; n > 0 && k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto& c = children[owner[k]];
      const auto name = "worker process " + std::to_string(owner[k] + 1);
      char buf[65536];
      const auto got = ::read(c.up, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        c.eof = true;
        const auto how = workers.reap(c);
        if (!c.has_result) throw std::runtime_error(name + " " + how + " without a result");
        continue;
      }
      c.reader.feed(std::string_view(buf, static_cast<std::size_t>(got)));
      while (auto f = c.reader.next()) {
        switch (f->type) {
          case frame_type::ready:
            c.ready = true;
            ++ready;
            break;
          case frame_type::progress:
            if (f->payload.size() == sizeof c.answered)
              std::memcpy(&c.answered, f->payload.data(), sizeof c.answered);
            break;
          case frame_type::result:
            c.result = run_result::deserialize(f->payload);
            c.answered = c.result.decisions() + c.result.errors;
            c.has_result = true;
            ++done;
            break;
          case frame_type::failure:
            throw std::runtime_error(name + ": " + f->payload);
          case frame_type::start:
            throw std::runtime_error(name + ": unexpected frame");
        }
      }
    }

    if (start_us == 0 && ready == children.size()) {
      // Far enough ahead for every worker to read it and every thread to wake.
      start_us = now_us() + 100'000 + 2'000 * static_cast<std::int64_t>(children.size());
      const std::string payload(reinterpret_cast<const char*>(&start_us), sizeof start_us);
      for (auto& c : children)
        if (!write_frame(c.down, frame_type::start, payload))
          throw std::runtime_error("a worker process went away before the start");
    }
    if (start_us != 0 && progress) {
      std::uint64_t answered = 0;
      for (const auto& c : children) answered += c.answered;
      const double fraction = opts.is_burst() ? static_cast<double>(answered) / planned
                                              : static_cast<double>(now_us() - start_us) / planned;
      progress(std::clamp(fraction, 0.0, 1.0), answered);
    }
  }

  workers.reap_all();
  run_result total;
  for (const auto& c : children) total.merge(c.result);
  total.started_us = start_us;
  return total;
}

}  // namespace floodgate::bench
