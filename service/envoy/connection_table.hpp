// The open connections of a listener that hands them over to someone who closes them without
// telling (the gRPC port: the accept loop admits, an I/O thread serves and closes), counted against
// two caps: all connections, and one client address's. An entry is a descriptor and the socket's
// inode; when the descriptor no longer holds that socket, the connection was closed. Entries
// are checked only when a cap would refuse (one address's entries for its cap, all for the
// global one), so an accept under the caps costs a map insert. Pure: how a descriptor is
// checked is given (tests pass a fake).
//
//   connection_table t({.max_connections = 1024, .max_per_peer = 256}, socket_still_open);
//   if (t.admit(fd, inode, "10.0.0.7") != connection_table::verdict::admitted) ::close(fd);
//
// Not thread-safe: one accept loop owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

namespace floodgate::service::envoy {

struct connection_caps {
  std::size_t max_connections = 1024;  // open connections in all
  std::size_t max_per_peer = 256;      // open connections from one client address
};

class connection_table {
 public:
  enum class verdict { admitted, over_global, over_per_peer };
  // Whether descriptor `fd` still holds the socket whose inode was `inode`.
  using still_open = std::function<bool(int fd, std::uint64_t inode)>;

  connection_table(connection_caps caps, still_open probe);

  // A connection just accepted on `fd` (its socket's inode) from `peer`: counted if both caps
  // leave room, else refused (the caller closes it).
  verdict admit(int fd, std::uint64_t inode, const std::string& peer);

  // Connections counted (some may have closed since the last check).
  std::size_t size() const noexcept { return by_fd_.size(); }
  const connection_caps& caps() const noexcept { return caps_; }

 private:
  struct entry {
    std::uint64_t inode;
    std::string peer;
  };
  void erase(std::unordered_map<int, entry>::iterator it);
  // Forgets the closed connections (of `peer` only, when given).
  void forget_closed(const std::string* peer);
  std::size_t count_of(const std::string& peer) const;

  connection_caps caps_;
  still_open probe_;
  std::unordered_map<int, entry> by_fd_;
  std::unordered_map<std::string, std::size_t> per_peer_;
};

// The probe for real descriptors: fstat says a socket with that inode.
bool socket_still_open(int fd, std::uint64_t inode);

}  // namespace floodgate::service::envoy
