#include "fake_redis.hpp"
#include "loopback_listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "redis/resp_reader.hpp"

namespace floodgate::test {

fake_redis::fake_redis(responder r, options o) : responder_(std::move(r)), options_(o) {
  const auto l = listen_loopback("fake_redis", 64);
  listen_fd_ = l.fd;
  port_ = l.port;
  if (::pipe(stop_pipe_) != 0) throw std::runtime_error("fake_redis: cannot make its stop pipe");
  acceptor_ = std::thread([this] { accept_loop(); });
}

fake_redis::~fake_redis() {
  stopping_ = true;
  char c = 's';
  [[maybe_unused]] auto w = ::write(stop_pipe_[1], &c, 1);
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    threads = std::move(threads_);
  }
  for (auto& t : threads) t.join();
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

std::vector<fake_redis::command> fake_redis::commands() const {
  std::lock_guard lock(mutex_);
  return commands_;
}

bool fake_redis::is_script_load(const command& c) {
  return c.size() == 3 && c[0] == "SCRIPT" && c[1] == "LOAD";
}

std::string fake_redis::sha_reply(const command&) {
  return "$40\r\n" + std::string(40, 'f') + "\r\n";
}

void fake_redis::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) return;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    ++accepted_;
    // Replies go out one send() per command: without this, Nagle holds the second of two
    // pipelined replies for the client's delayed ACK (40 ms), which real Redis never does.
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (options_.close_at_once) {
      ::close(fd);
      continue;
    }
    std::lock_guard lock(mutex_);
    fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void fake_redis::serve(int fd) {
  redis::resp_reader reader(64 << 20);  // commands are arrays of bulk strings: valid RESP
  char buf[4096];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reader.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    redis::reply r;
    while (reader.next(r) == redis::resp_reader::result::ready) {
      command c;
      for (const auto& e : r.elements) c.push_back(e.str);
      {
        std::lock_guard lock(mutex_);
        commands_.push_back(c);
      }
      // The handshake's HELLO is answered as a Redis of options_.version would, unless the
      // responder is told to see it.
      const std::string out =
          !c.empty() && c[0] == "HELLO" && !options_.answer_hello
              ? "*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$" +
                    std::to_string(options_.version.size()) + "\r\n" + options_.version + "\r\n"
              : responder_(c);
      if (options_.byte_delay.count() > 0) {
        for (char ch : out) {
          if (::send(fd, &ch, 1, MSG_NOSIGNAL) != 1) break;
          std::this_thread::sleep_for(options_.byte_delay);
        }
      } else if (!out.empty() && ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) < 0) {
        break;
      }
    }
  }
  std::lock_guard lock(mutex_);
  std::erase(fds_, fd);
  ::close(fd);
}

}  // namespace floodgate::test
