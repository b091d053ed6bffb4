#include "fault_relay.hpp"
#include "loopback_listener.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <list>
#include <stdexcept>
#include <vector>

namespace floodgate::test {

namespace {

using clock = std::chrono::steady_clock;

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Closes with RST instead of FIN.
void reset(int fd) {
  const linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

struct chunk {
  clock::time_point due;
  std::string bytes;
};

struct pair {
  int client = -1;
  int server = -1;
  std::string to_server;      // client bytes not yet written
  std::deque<chunk> to_client;  // server bytes, each released at its time
  bool dead = false;
};

// Writes what it can of `bytes` (non-blocking); false when the socket failed.
bool write_some(int fd, std::string& bytes, std::size_t at_most) {
  const auto n = ::send(fd, bytes.data(), std::min(bytes.size(), at_most), MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
  bytes.erase(0, static_cast<std::size_t>(n));
  return true;
}

}  // namespace

fault_relay::fault_relay(std::uint16_t target_port) : target_port_(target_port) {
  const auto l = listen_loopback("fault_relay", 128);
  listen_fd_ = l.fd;
  port_ = l.port;
  if (::pipe(wake_) != 0) throw std::runtime_error("fault_relay: cannot make its wake pipe");
  thread_ = std::thread([this] { run(); });
}

fault_relay::~fault_relay() {
  const char stop = 1;
  [[maybe_unused]] auto n = ::write(wake_[1], &stop, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void fault_relay::run() {
  std::list<pair> pairs;
  std::vector<char> buffer(64 * 1024);
  for (;;) {
    const auto now = clock::now();
    const auto before = fault_.load();
    const bool reading = before != fault::stall;
    const bool forwarding_before = before != fault::black_hole && before != fault::stall;

    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    int timeout_ms = 50;  // faults change without a wake-up: look again soon
    for (auto& p : pairs) {
      const bool due = forwarding_before && !p.to_client.empty() && p.to_client.front().due <= now;
      short client_events = reading ? POLLIN : 0;
      if (due) client_events |= POLLOUT;
      short server_events = reading ? POLLIN : 0;
      if (forwarding_before && !p.to_server.empty()) server_events |= POLLOUT;
      fds.push_back({p.client, client_events, 0});
      fds.push_back({p.server, server_events, 0});
      if (forwarding_before && !p.to_client.empty() && !due) {
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(p.to_client.front().due - now);
        timeout_ms = std::min<int>(timeout_ms, static_cast<int>(std::max<long long>(wait.count(), 1)));
      }
    }
    ::poll(fds.data(), fds.size(), timeout_ms);
    if (fds[0].revents) break;

    const auto latency = std::chrono::milliseconds(latency_ms_.load());
    std::size_t i = 2;
    for (auto& p : pairs) {
      const auto client_events = fds[i++].revents;
      const auto server_events = fds[i++].revents;
      if (p.dead) continue;
      if (reading && (client_events & (POLLIN | POLLHUP | POLLERR))) {
        const auto n = ::recv(p.client, buffer.data(), buffer.size(), 0);
        if (n <= 0 && !(n < 0 && errno == EAGAIN)) p.dead = true;
        if (n > 0) p.to_server.append(buffer.data(), static_cast<std::size_t>(n));
      }
      if (reading && (server_events & (POLLIN | POLLHUP | POLLERR))) {
        const auto n = ::recv(p.server, buffer.data(), buffer.size(), 0);
        if (n <= 0 && !(n < 0 && errno == EAGAIN)) p.dead = true;
        if (n > 0)
          p.to_client.push_back({clock::now() + latency,
                                 std::string(buffer.data(), static_cast<std::size_t>(n))});
      }
      // The fault now, after the reads: bytes sent after set_fault() returned meet it.
      const auto f = fault_.load();
      const bool forwarding = f != fault::black_hole && f != fault::stall;
      if (!forwarding || p.dead) continue;
      if (!p.to_server.empty() && !write_some(p.server, p.to_server, p.to_server.size()))
        p.dead = true;
      while (!p.dead && !p.to_client.empty() && p.to_client.front().due <= clock::now()) {
        auto& bytes = p.to_client.front().bytes;
        if (f == fault::reset_mid_reply) {
          std::string half = bytes.substr(0, std::max<std::size_t>(1, bytes.size() / 2));
          write_some(p.client, half, half.size());
          reset(p.client);
          p.client = -1;
          p.dead = true;
          break;
        }
        const std::size_t held = bytes.size();
        if (!write_some(p.client, bytes, f == fault::slice ? 1 : bytes.size())) p.dead = true;
        const bool full = bytes.size() == held;  // the socket took nothing
        if (bytes.empty()) p.to_client.pop_front();  // `bytes` is gone from here on
        if (f == fault::slice || full) break;        // one byte a turn, or full
      }
    }
    // After the pairs polled above (fds has entries for those only).
    if (fds[1].revents & POLLIN) {
      const int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client >= 0) {
        ++accepted_;
        const int server = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        to.sin_port = htons(target_port_);
        if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
          if (server >= 0) ::close(server);
          reset(client);
        } else {
          set_nonblocking(client);
          set_nonblocking(server);
          pairs.push_back({client, server, {}, {}, false});
        }
      }
    }

    for (auto it = pairs.begin(); it != pairs.end();) {
      if (!it->dead) {
        ++it;
        continue;
      }
      if (it->client >= 0) ::close(it->client);
      ::close(it->server);
      it = pairs.erase(it);
    }
  }
  for (auto& p : pairs) {
    if (p.client >= 0) ::close(p.client);
    ::close(p.server);
  }
}

}  // namespace floodgate::test
