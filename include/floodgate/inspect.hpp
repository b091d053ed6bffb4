// Looking at the Redis behind a backend URL the way floodgate uses it, beside the decisions: a
// key's state as stored (TYPE, value, PTTL) and each node's INFO and TIME. What `floodgate
// inspect`, floodgated's GET /v1/inspect, its Redis metrics and its clock skew check are made of.
//
//   floodgate::redis_inspector r{"redis+cluster://127.0.0.1:7000", 1s};
//   floodgate::raw_state s = r.read_state(api, "user-1");
//   if (s.error.empty() && s.type != "none") use(s.value, s.ttl_ms);
//   for (const auto& node : r.nodes().nodes) use(r.info(node).text, r.time(node).since_epoch);
//
// The URL is read as make_backend reads it (its options: key_prefix, TLS files, the sentinels'
// credentials), and every question goes to a node as the backend would send it: for redis://
// and rediss:// the URL's node; for redis+cluster:// the key's slot master (asked of the seeds in
// turn; a MOVED is followed to the node it names, an ASK once after ASKING, at most 5
// redirections per command, as the backend); for redis+sentinel:// the primary of the newest
// configuration the sentinels name (asked again at each read_state and nodes()).
//
// Blocking, on connections of the inspector's own (kept per node, closed after any failure),
// never the backend's: each connect and each answer takes at most `timeout`. Call it off I/O
// threads. Not thread-safe, except stop(). Never throws once built: failures are answers,
// in the server's words and naming the node.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/policy.hpp"

namespace floodgate {

// A key's state as Redis stores it.
struct raw_state {
  bool readable = false;      // the URL names a Redis (every Redis URL does)
  std::string why_not;        // when not readable: e.g. "memory:// keeps state inside the process"
  std::string error;          // non-empty: the read failed (node and the server's own words)
  std::string node;           // host:port the state was read from (set when one answered)
  std::string redis_key;      // the key read
  std::string type;           // TYPE: "none", "string", "hash", "zset"
  std::string value;          // printable: GET, HGETALL, or the first 10 of ZRANGE WITHSCORES
  std::int64_t members = -1;  // zset: ZCARD; else -1
  std::int64_t ttl_ms = -2;   // PTTL (-2: no key, -1: no expiry)
};

// The nodes of a URL to ask INFO and TIME of, by their "host:port" ("[v6]:port").
struct node_list {
  std::vector<std::string> nodes;
  std::string error;  // Sentinel: why no sentinel named the primary just now
};

// A node's INFO text ("field:value" lines under "# Section" headers), or why there is none.
struct node_info {
  std::string text;
  std::string error;  // no answer ("host:port: no answer within 1000 ms") or the error reply
};

// A node's clock (TIME), or why there is none.
struct node_time {
  std::chrono::microseconds since_epoch{0};
  std::string error;  // as node_info's
};

class redis_inspector {
 public:
  // `timeout`: each connect and each answer. A URL that names no Redis, or one the backend
  // refuses, gives an inspector whose every answer says so (why_not()).
  explicit redis_inspector(std::string_view url,
                           std::chrono::milliseconds timeout = std::chrono::seconds(1));
  ~redis_inspector();
  redis_inspector(const redis_inspector&) = delete;
  redis_inspector& operator=(const redis_inspector&) = delete;

  // Whether the URL's scheme is a Redis one (redis, rediss, redis+cluster, redis+sentinel, and
  // their TLS forms), well-formed or not.
  bool names_redis() const noexcept;
  // Empty when the URL names a Redis the backend would take. Otherwise why not: memory:// keeps
  // its state in the process, another scheme is not Redis, or the URL's config_error text.
  const std::string& why_not() const noexcept;

  // The state of `key` for policy `p`, on the node that holds it (the key named as the backend
  // names it, with the URL's key_prefix). Asks at most: once per sentinel, then TYPE, the value,
  // ZCARD, PTTL, each on at most (seeds + 5) nodes.
  raw_state read_state(const policy& p, std::string_view key);

  // redis:// and rediss://: the URL's node; redis+cluster://: the seeds, as the URL lists them
  // (so they are bounded by the URL); redis+sentinel://: the primary the sentinels name now
  // (asked at each call), or, when none does, the one named last (none before the first) with
  // `error` saying why. Empty when why_not() is not.
  node_list nodes();
  // INFO `section` ("all": everything, commandstats included) of a node nodes() named.
  node_info info(std::string_view node, std::string_view section = "all");
  // TIME of a node nodes() named: its clock, one round trip late at most.
  node_time time(std::string_view node);

  // Any thread: the question in progress and every later one return at once ("stopped").
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// read_state on an inspector of its own: `floodgate inspect` and GET /v1/inspect.
raw_state read_raw_state(std::string_view url, const policy& p, std::string_view key,
                         std::chrono::milliseconds timeout);

// `s` with bytes outside printable ASCII (and '\') as \xNN: for terminals and logs.
std::string printable(std::string_view s);

// The exact Lua text floodgate loads (SCRIPT LOAD) to decide for `a`: to load the very same
// script elsewhere (floodgate-bench --print-script, then redis-benchmark).
std::string_view script_source(algorithm a);
// The same scripts as the function library floodgate loads (FUNCTION LOAD) and calls by FCALL:
// its first line names it, `#!lua name=<name>`; the function for `a` is `<name>_<a>`.
std::string_view script_library_source();

}  // namespace floodgate
