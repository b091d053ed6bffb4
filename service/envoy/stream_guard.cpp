#include "stream_guard.hpp"

namespace floodgate::service::envoy {

stream_guard::ticket stream_guard::admit(const std::string& peer, clock::time_point now,
                                         void* owner) {
  std::lock_guard lock(mutex_);
  if (const auto p = per_peer_.find(peer);
      p != per_peer_.end() && p->second >= caps_.max_reading_per_peer)
    return {verdict::over_per_peer, 0, nullptr};
  void* evicted = nullptr;
  if (waiting_.size() >= caps_.max_reading && !waiting_.empty()) {
    evicted = waiting_.begin()->second.owner;
    erase(waiting_.begin());
  }
  ++per_peer_[peer];
  const auto id = next_id_++;
  waiting_.emplace_hint(waiting_.end(), id, entry{now + caps_.message_timeout, peer, owner});
  return {verdict::admitted, id, evicted};
}

void stream_guard::erase(std::map<std::uint64_t, entry>::iterator it) {
  const auto p = per_peer_.find(it->second.peer);
  if (p != per_peer_.end() && --p->second == 0) per_peer_.erase(p);
  waiting_.erase(it);
}

bool stream_guard::arrived(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  const auto it = waiting_.find(id);
  if (it == waiting_.end()) return false;
  erase(it);
  return true;
}

std::vector<void*> stream_guard::expire(clock::time_point now) {
  std::vector<void*> out;
  std::lock_guard lock(mutex_);
  while (!waiting_.empty() && waiting_.begin()->second.deadline <= now) {
    out.push_back(waiting_.begin()->second.owner);
    erase(waiting_.begin());
  }
  return out;
}

std::optional<stream_guard::clock::time_point> stream_guard::next_deadline() const {
  std::lock_guard lock(mutex_);
  if (waiting_.empty()) return std::nullopt;
  return waiting_.begin()->second.deadline;
}

std::size_t stream_guard::size() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

}  // namespace floodgate::service::envoy
