// A key's state as Redis stores it (TYPE, its value, PTTL), read on a short-lived hiredis
// connection of its own: what `floodgate inspect` prints and GET /v1/inspect returns beside the
// peek. Blocking (connect and each command bounded by `timeout`): call it off I/O threads.
//
//   raw_state s = read_raw_state("redis://127.0.0.1:6379", rule.policy, "user-1", 2s);
//   if (s.error.empty() && s.type != "none") use(s.value, s.ttl_ms);
//
// Only plain redis:// URLs are read (the state key's node is the URL's); for the others
// `readable` is false and `why_not` says why.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/policy.hpp"

namespace floodgate::service {

struct raw_state {
  bool readable = false;      // the URL lets us read it (redis://, no TLS)
  std::string why_not;        // when not readable: e.g. "memory:// keeps state inside floodgated"
  std::string error;          // non-empty: the read failed (connect, AUTH, timeout)
  std::string redis_key;      // the key read
  std::string type;           // TYPE: "none", "string", "hash", "zset"
  std::string value;          // printable: GET, HGETALL, or the first 10 of ZRANGE WITHSCORES
  std::int64_t members = -1;  // zset: ZCARD; else -1
  std::int64_t ttl_ms = -2;   // PTTL (-2: no key, -1: no expiry)
};

// The state of `key` for policy `p` in the Redis of `url` (the key named as the backend names
// it, with the URL's key_prefix).
raw_state read_raw_state(const std::string& url, const policy& p, std::string_view key,
                         std::chrono::milliseconds timeout);

// `s` with bytes outside printable ASCII (and '\') as \xNN: for terminals and logs.
std::string printable(std::string_view s);

}  // namespace floodgate::service
