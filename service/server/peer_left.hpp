// Whether the client of a connection has left: it closed its side (EOF) or reset the
// connection. Asked before answering a request that hands out something only that client could
// give back (a lease), since a write into a closed socket still succeeds (the kernel accepts
// it; the peer's RST comes later). A client that half-closes after its request is taken as
// gone, as nginx takes it (499).
//
//   if (peer_left(socket.native_handle())) give the lease back, close;
#pragma once

#include <sys/socket.h>

#include <cerrno>

namespace floodgate::service {

// Peeks one byte without blocking or consuming it: 0 is EOF, an error other than "nothing to
// read yet" (EAGAIN) is a reset; a byte (a pipelined request) is a client still there.
inline bool peer_left(int fd) noexcept {
  char byte;
  for (;;) {
    const auto n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

}  // namespace floodgate::service
