#pragma once
// A listening TCP socket on 127.0.0.1 and a port the kernel picked: the test servers'
// (fake_redis, fault_relay) first step.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace floodgate::test {

struct loopback_listener {
  int fd;
  std::uint16_t port;
};

// Throws std::runtime_error naming `who` when the socket cannot be made.
inline loopback_listener listen_loopback(const std::string& who, int backlog) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(who + ": cannot listen");
  }
  return {fd, ntohs(addr.sin_port)};
}

}  // namespace floodgate::test
