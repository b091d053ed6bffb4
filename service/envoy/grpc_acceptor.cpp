#include "grpc_acceptor.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "logging/log_format.hpp"
#include "logging/log_throttle.hpp"

namespace floodgate::service::envoy {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// At most one line a second for each kind of trouble a client can repeat at will.
constexpr auto log_interval = 1s;
// How long an accept that found no descriptor waits before trying again.
constexpr auto descriptor_backoff = 100ms;

// A refusal, for the throttled log line.
struct cap_event {
  connection_table::verdict cap = connection_table::verdict::over_global;
  std::string peer;
};

const char* to_string(connection_table::verdict v) {
  return v == connection_table::verdict::over_per_peer ? "per_peer" : "global";
}

// The address a peer's connections are counted under: an IPv4-mapped IPv6 peer (a dual-stack
// listener) is the IPv4 address it is.
std::string peer_address(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&in6))
      ::inet_ntop(AF_INET, in6.s6_addr + 12, text, sizeof text);
    else
      ::inet_ntop(AF_INET6, &in6, text, sizeof text);
  }
  return text;
}

// HOST:PORT, HOST possibly [bracketed]: a listening socket on the first address that binds.
int listen_on(const std::string& address) {
  const auto fail = [&](const std::string& why) {
    return std::runtime_error("--grpc-listen: cannot listen on " + address + ": " + why);
  };
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw fail("want HOST:PORT");
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  unsigned number = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (ec != std::errc{} || end != port.data() + port.size() || number > 65535)
    throw fail("the port must be a number from 0 to 65535");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    throw fail(::gai_strerror(rc));
  std::string why = "no address";
  int fd = -1;
  for (auto* ai = found; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw fail(why);
  return fd;
}

bool out_of_descriptors(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

}  // namespace

struct grpc_acceptor::impl {
  impl(const std::string& address, connection_caps caps, on_admitted hand, on_refused refused)
      : listener(listen_on(address)),
        wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        table(caps, socket_still_open),
        hand_over(std::move(hand)),
        note_refused(std::move(refused)) {
    if (wake < 0) {
      ::close(listener);
      throw std::runtime_error(std::string("--grpc-listen: eventfd: ") + std::strerror(errno));
    }
  }
  ~impl() {
    if (listener >= 0) ::close(listener);
    ::close(wake);
  }

  void run();
  void accept_one(clock::time_point& retry_at);
  // A throttle asked for a flush at `at`: the loop wakes for the earliest asked.
  void arm_flush(std::optional<clock::time_point> at) {
    if (at && (!flush_at || *at < *flush_at)) flush_at = at;
  }
  void flush_logs(bool stopping);

  int listener;
  int wake;
  connection_table table;
  on_admitted hand_over;
  on_refused note_refused;
  std::thread thread;
  log_throttle<cap_event> cap_log{log_interval};
  log_throttle<int> accept_log{log_interval};  // errno of an accept that failed
  std::optional<clock::time_point> flush_at;
};

void grpc_acceptor::impl::run() {
  clock::time_point retry_at{};  // out of descriptors: no accept before then
  for (;;) {
    const auto now = clock::now();
    if (flush_at && now >= *flush_at) {
      flush_at.reset();
      flush_logs(false);
    }
    const bool waiting = now < retry_at;
    auto until = waiting ? retry_at : clock::time_point::max();
    if (flush_at) until = std::min(until, *flush_at);
    const int timeout =
        until == clock::time_point::max()
            ? -1
            : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(until - now).count());
    pollfd fds[2] = {{wake, POLLIN, 0}, {listener, POLLIN, 0}};
    const int n = ::poll(fds, waiting ? 1 : 2, timeout);
    if (n < 0 && errno != EINTR) {
      spdlog::error("msg=\"grpc accept loop: poll failed\" error={}", quote(std::strerror(errno)));
      std::this_thread::sleep_for(descriptor_backoff);
      continue;
    }
    if (n > 0 && fds[0].revents) break;  // stop()
    if (!waiting && n > 0 && fds[1].revents) accept_one(retry_at);
  }
  flush_logs(true);
}

void grpc_acceptor::impl::accept_one(clock::time_point& retry_at) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int fd =
      ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK || error == EINTR || error == ECONNABORTED) return;
    // Out of descriptors: the connection waits in the backlog until some come back (an HTTP
    // connection or a gRPC one closing); other errors (a firewall's EPERM) lose that one only.
    const auto retry_in = out_of_descriptors(error) ? descriptor_backoff : 0ms;
    retry_at = clock::now() + retry_in;
    const auto d = accept_log.on_event(clock::now(), error);
    if (d.log)
      spdlog::warn("msg=\"grpc accept failed\" error={} retry_in_ms={} more_since_last_line={}",
                   quote(std::strerror(error)), retry_in.count(), d.suppressed);
    arm_flush(d.flush_at);
    return;
  }
  const std::string peer = peer_address(addr);
  struct stat st {};
  const auto inode = ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
  const auto v = table.admit(fd, inode, peer);
  if (v != connection_table::verdict::admitted) {
    note_refused(v);  // first: whoever sees the close can already see it counted
    ::close(fd);
    const auto d = cap_log.on_event(clock::now(), cap_event{v, peer});
    if (d.log)
      spdlog::warn(
          "msg=\"grpc connection cap reached\" cap={} action=refused peer={} max_connections={} "
          "max_connections_per_peer={} more_since_last_line={}",
          to_string(v), quote(peer), table.caps().max_connections, table.caps().max_per_peer,
          d.suppressed);
    arm_flush(d.flush_at);
    return;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  hand_over(fd, peer);
}

void grpc_acceptor::impl::flush_logs(bool stopping) {
  const auto now = clock::now();
  const char* tail = stopping ? " stopping=true" : "";
  if (const auto s = cap_log.on_flush(now))
    spdlog::warn(
        "msg=\"grpc connection caps reached, not logged since the last line\" count={} "
        "last_cap={} last_peer={}{}",
        s->count, to_string(s->last.cap), quote(s->last.peer), tail);
  if (const auto s = accept_log.on_flush(now))
    spdlog::warn(
        "msg=\"grpc accepts failed, not logged since the last line\" count={} "
        "last_error={}{}",
        s->count, quote(std::strerror(s->last)), tail);
}

grpc_acceptor::grpc_acceptor(const std::string& address, connection_caps caps,
                             on_admitted hand_over, on_refused refused)
    : impl_(std::make_unique<impl>(address, caps, std::move(hand_over), std::move(refused))) {}

grpc_acceptor::~grpc_acceptor() {
  stop();
}

int grpc_acceptor::port() const noexcept {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
}

void grpc_acceptor::start() {
  if (!impl_->thread.joinable()) impl_->thread = std::thread([i = impl_.get()] { i->run(); });
}

void grpc_acceptor::stop() {
  if (impl_->thread.joinable()) {
    const std::uint64_t one = 1;
    (void)!::write(impl_->wake, &one, sizeof one);
    impl_->thread.join();
  }
  if (impl_->listener >= 0) {
    ::close(impl_->listener);
    impl_->listener = -1;
  }
}

}  // namespace floodgate::service::envoy
