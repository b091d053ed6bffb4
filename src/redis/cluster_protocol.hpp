// Redis Cluster's protocol pieces, without I/O: key slots (CRC16 of the hash tag), MOVED/ASK
// redirections, and the CLUSTER SLOTS map. Fed strings and replies, tested on them.
//
//   key_slot("floodgate:api:gcra:{alice}") == key_slot("alice")
//   parse_redirect("MOVED 3999 127.0.0.1:6381")  // {moved, 3999, "127.0.0.1", 6381}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.hpp"

namespace floodgate::redis {

constexpr int cluster_slots = 16384;
// Redirections (MOVED, ASK) followed per command before giving up: a slot moves at most once or
// twice while a call lasts; more means the cluster disagrees with itself.
constexpr int max_cluster_redirects = 5;

// CRC16-XMODEM, as Redis Cluster uses it.
std::uint16_t crc16(std::string_view data) noexcept;
// The slot of a key: of the text inside its first non-empty {...}, else of the whole key.
int key_slot(std::string_view key) noexcept;

struct redirect {
  enum class kind { moved, ask } what;
  int slot = 0;
  std::string host;  // may be empty: the node that answered (Redis's "unknown endpoint")
  std::uint16_t port = 0;
};
// From an error reply's text ("MOVED <slot> <host>:<port>" or "ASK ..."); nullopt otherwise.
std::optional<redirect> parse_redirect(std::string_view error);

struct slot_range {
  int first = 0;
  int last = 0;
  std::string host;  // may be empty: the node that answered
  std::uint16_t port = 0;
};
// The masters of CLUSTER SLOTS; nullopt for a reply that is not a well-formed map.
std::optional<std::vector<slot_range>> parse_cluster_slots(const reply& r);

}  // namespace floodgate::redis
