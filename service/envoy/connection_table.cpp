#include "connection_table.hpp"

#include <sys/stat.h>

namespace floodgate::service::envoy {

connection_table::connection_table(connection_caps caps, still_open probe)
    : caps_(caps), probe_(std::move(probe)) {}

connection_table::verdict connection_table::admit(int fd, std::uint64_t inode,
                                                  const std::string& peer) {
  // The kernel hands out a descriptor number only once it is free: whatever this table held
  // under it was closed.
  if (const auto it = by_fd_.find(fd); it != by_fd_.end()) erase(it);
  if (count_of(peer) >= caps_.max_per_peer) forget_closed(&peer);
  if (by_fd_.size() >= caps_.max_connections) forget_closed(nullptr);
  if (by_fd_.size() >= caps_.max_connections) return verdict::over_global;
  if (count_of(peer) >= caps_.max_per_peer) return verdict::over_per_peer;
  by_fd_.emplace(fd, entry{inode, peer});
  ++per_peer_[peer];
  return verdict::admitted;
}

void connection_table::erase(std::unordered_map<int, entry>::iterator it) {
  const auto p = per_peer_.find(it->second.peer);
  if (p != per_peer_.end() && --p->second == 0) per_peer_.erase(p);
  by_fd_.erase(it);
}

void connection_table::forget_closed(const std::string* peer) {
  for (auto it = by_fd_.begin(); it != by_fd_.end();) {
    const auto next = std::next(it);
    if ((!peer || it->second.peer == *peer) && !probe_(it->first, it->second.inode)) erase(it);
    it = next;
  }
}

std::size_t connection_table::count_of(const std::string& peer) const {
  const auto it = per_peer_.find(peer);
  return it == per_peer_.end() ? 0 : it->second;
}

bool socket_still_open(int fd, std::uint64_t inode) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == inode;
}

}  // namespace floodgate::service::envoy
