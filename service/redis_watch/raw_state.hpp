// A key's state as Redis stores it (TYPE, its value, PTTL), read on short-lived connections of
// its own: what `floodgate inspect` prints and GET /v1/inspect returns beside the peek.
// Blocking (every connect and command bounded by `timeout`): call it off I/O threads.
//
//   raw_state s = read_raw_state("redis+cluster://127.0.0.1:7000", rule.policy, "user-1", 1s);
//   if (s.error.empty() && s.type != "none") use(s.value, s.ttl_ms);
//
// Every Redis URL the backend takes is read, on the node that holds the key: the URL's for
// redis:// and rediss://; for redis+cluster:// the master of the key's slot (asked of the
// seeds in turn; a MOVED is followed to the node it names, an ASK once after ASKING, at most
// max_redirects per command); for redis+sentinel:// the primary of the newest configuration
// the sentinels name (redis/sentinel_answer.hpp). TLS, credentials and the db as the backend uses
// them (the URL's options, read by the backend's own parsers; the connection is the backend's
// sentinel_socket). Each connect and answer takes at most `timeout`, and the read asks at most: two
// questions per sentinel, then 5 commands (TYPE, the value, ZCARD, PTTL), each on at most (seeds +
// max_redirects) nodes. memory:// is not read (`readable` false, `why_not` says why).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/policy.hpp"

namespace floodgate::service {

struct raw_state {
  bool readable = false;      // the URL names a Redis (every Redis URL does)
  std::string why_not;        // when not readable: e.g. "memory:// keeps state inside floodgated"
  std::string error;          // non-empty: the read failed (node and the server's own words)
  std::string node;           // host:port the state was read from (set when one answered)
  std::string redis_key;      // the key read
  std::string type;           // TYPE: "none", "string", "hash", "zset"
  std::string value;          // printable: GET, HGETALL, or the first 10 of ZRANGE WITHSCORES
  std::int64_t members = -1;  // zset: ZCARD; else -1
  std::int64_t ttl_ms = -2;   // PTTL (-2: no key, -1: no expiry)
};

// Cluster: redirections followed per command before giving up (a slot moves at most once or
// twice while a read lasts; more means the cluster disagrees with itself).
inline constexpr int max_redirects = 5;

// The state of `key` for policy `p` in the Redis of `url` (the key named as the backend names
// it, with the URL's key_prefix). Never throws: a bad URL is an error.
raw_state read_raw_state(const std::string& url, const policy& p, std::string_view key,
                         std::chrono::milliseconds timeout);

// `s` with bytes outside printable ASCII (and '\') as \xNN: for terminals and logs.
std::string printable(std::string_view s);

}  // namespace floodgate::service
