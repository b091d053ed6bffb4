// Where a (policy, caller key) pair lives in Redis (docs/algorithms.md, "Redis
// representation"):
//
//   <prefix><policy name>:<code><units>:{<caller key>}     e.g. floodgate:api:gt600:{alice}
//   <prefix><policy name>:bk:{<caller key>}                a penalty's end (block_for)
//   <prefix><policy name>:cc:{<caller key>}                a concurrency limit's leases
//
// The code is `sl` (sliding_log), `sw` (sliding_window), `fw` (fixed_window), `tb`
// (token_bucket) or `gc` (gcra): short, so that a state key with a 16-byte caller key stays
// within 44 bytes (88 bytes of memory). token_bucket and gcra add the units their state is
// kept in (core/state_unit.hpp: the window; the emission interval), so a state is never read
// under another policy's units.
//
// The braces are the Redis Cluster hash tag. A caller key that is longer than
// max_plain_key_size bytes, contains '{' or '}', or starts with '#' is stored as '#' followed
// by the hex SHA-256 of the key instead: the tag stays well-formed and short, and no plain
// key can collide with a hashed one (plain keys never start with '#'). Any bytes are fine
// otherwise (CR, LF, NUL, invalid UTF-8): keys are sent binary-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "floodgate/policy.hpp"
#include "floodgate/semaphore.hpp"

namespace floodgate::redis {

struct key_format {
  std::string_view prefix;
  std::size_t max_plain_key_size;
};

bool stored_as_hash(std::string_view caller_key, std::size_t max_plain_key_size) noexcept;

// The key's size in bytes, without building it.
std::size_t state_key_size(const key_format& f, const policy& p,
                           std::string_view caller_key) noexcept;
// Appends the key to `out`.
void append_state_key(std::string& out, const key_format& f, const policy& p,
                      std::string_view caller_key);
std::string state_key(const key_format& f, const policy& p, std::string_view caller_key);

// The key of (policy, caller key)'s penalty: its end time in ms, whatever the algorithm and
// its units (a time means the same under every policy), in the state key's hash slot.
std::size_t block_key_size(const key_format& f, const policy& p,
                           std::string_view caller_key) noexcept;
void append_block_key(std::string& out, const key_format& f, const policy& p,
                      std::string_view caller_key);

// Either key as a RESP bulk string ($<size>\r\n<key>\r\n), as a script call's KEYS go, the
// caller key's form (stored_as_hash) decided once for its size and its text.
void append_state_key_bulk(std::string& out, const key_format& f, const policy& p,
                           std::string_view caller_key);
void append_block_key_bulk(std::string& out, const key_format& f, const policy& p,
                           std::string_view caller_key);

// The sorted set of a concurrency limit's leases (score: expiry, member: lease id).
std::string lease_key(const key_format& f, const concurrency_policy& p,
                      std::string_view caller_key);

}  // namespace floodgate::redis
