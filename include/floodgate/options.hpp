// Settings, as plain structs with real defaults (redis-plus-plus's rule: every field says its
// meaning and unit; nothing waits forever).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace floodgate {

using namespace std::chrono_literals;

// A clock in milliseconds since the Unix epoch. Tests inject one; production leaves it empty.
using clock_fn = std::function<std::chrono::milliseconds()>;

// The wall clock, in ms since the epoch (what Redis's TIME gives, so both backends agree).
std::chrono::milliseconds system_now() noexcept;

struct memory_options {
  // Independent lock domains; unrelated keys rarely share one. Rounded up to a power of two.
  std::size_t shards = 64;
  // Time source; empty means system_now().
  clock_fn clock;
  // How often a shard drops state that no longer matters (expired), at the latest. A shard
  // also sweeps when it has doubled in size since its last sweep, so memory stays bounded.
  std::chrono::milliseconds sweep_interval = 1s;
  // Keys held at most (each shard holds its share), so a flood of distinct keys cannot grow
  // memory without bound (~200 bytes a key for the O(1) algorithms). At the bound a shard drops
  // its expired keys, then the ones closest to expiry, down to 7/8 of its share: an evicted
  // key starts again at full capacity, like a reset (docs/operations.md). memory://?max_keys=N.
  std::size_t max_keys = 1'000'000;
};

// TLS to Redis (a rediss:// URL). Files are PEM. Redis asks clients for a certificate unless
// the server sets tls-auth-clients no (or optional).
struct tls_options {
  std::string ca_file;      // CAs that sign the server's certificate; empty: the system's CAs
  std::string cert_file;    // this client's certificate, if the server asks for one
  std::string key_file;     // its private key
  std::string server_name;  // checked against the certificate and sent as SNI; empty: the host
  bool verify_peer = true;  // false accepts any certificate: never outside tests
};

struct redis_options {
  // Deadline of one call, from the moment it is issued until its reply (covers reconnect,
  // NOSCRIPT reload and retries). Past it the call fails with errc::timeout.
  std::chrono::milliseconds timeout = 50ms;
  // Deadline for establishing a connection (TCP connect + AUTH + SELECT + SCRIPT LOAD); also
  // how long a connection may owe replies without answering any before it counts as broken.
  std::chrono::milliseconds connect_timeout = 1s;
  // Connections per Redis server; calls are pipelined over them.
  std::size_t connections = 2;
  // Reconnect backoff: starts at `min`, doubles up to `max`, each wait jittered ±50%.
  std::chrono::milliseconds reconnect_backoff_min = 10ms;
  std::chrono::milliseconds reconnect_backoff_max = 1s;
  // Prepended to every key floodgate writes.
  std::string key_prefix = "floodgate:";
  // Caller keys longer than this (bytes), or containing '{' or '}', are stored as a hash.
  std::size_t max_plain_key_size = 128;
  // A reply larger than this (bytes) is a protocol error and drops the connection.
  std::size_t max_reply_size = 1 << 20;
  // Writes in flight per connection: each carries every call queued since the last one, the
  // checks among them decided by one script call (a batch), and is counted until its last
  // reply arrives. At the bound, calls wait and go out together with the next write; a call
  // that finds its connection idle is sent at once. Lower: bigger batches, less Redis CPU per
  // decision; higher: more overlap of the network with Redis's work.
  std::size_t max_writes_in_flight = 2;
  // Checks decided by one script call, at most (1 turns batching off). A batch holds Redis's
  // one thread for all its items, a few microseconds each.
  std::size_t max_batch_items = 64;
  // Call the scripts as Redis functions (FUNCTION LOAD once per connection, then FCALL), which
  // costs Redis less per call than EVALSHA: the helpers every script defines are defined once,
  // when the library loads. Where the server refuses the library (an ACL without FUNCTION or
  // FCALL), calls go as EVALSHA on their own; false sends EVALSHA always.
  bool use_functions = true;
  // Calls waiting for a connection or a reply, per connection; beyond it a call fails at once
  // with errc::not_connected instead of queueing without bound.
  std::size_t max_pending_per_connection = 65536;
  // Every topology (the server, each Cluster node, the Sentinel primary): after this many calls
  // in a row to one node got no answer (timeout or lost connection), calls for it fail at once
  // with not_connected for `breaker_open_for`; then one probe goes through, and its answer
  // closes the breaker.
  int breaker_failures = 5;
  std::chrono::milliseconds breaker_open_for = 500ms;
  // Sentinel (redis+sentinel://) only: credentials of the sentinels themselves (requirepass
  // or an ACL user in sentinel.conf); the URL's user:password are the primary's.
  std::string sentinel_user;
  std::optional<std::string> sentinel_password;
  // Used by rediss:// URLs only.
  tls_options tls;
  // Testing only: when set, scripts take "now" from this clock instead of Redis's TIME.
  clock_fn test_clock;
};

struct backend_options {
  memory_options memory;
  redis_options redis;
};

struct limiter_options {
  // Keys longer than this (bytes) are rejected with errc::key_too_long.
  std::size_t max_key_size = 1 << 20;
  // Items in one check_all, at most.
  std::size_t max_items = 16;

  // Local denials (docs/algorithms.md, "Local denials"): after the backend denied a request
  // with retry_after T, the same request (policy, key, cost) is denied in this process without
  // a backend call until T has passed. Never with the memory backend (it is local already),
  // nor for a policy built with local_denials::off. false: every check asks the backend.
  bool local_denials = true;
  // The longest a local denial lives (ms), however long its retry_after: a reset made by
  // another process is seen this late at most. 0 turns local denials off.
  std::chrono::milliseconds max_local_denial = 1s;
  // Local denials remembered at once, at most (each ~200 bytes; keys over 256 bytes are never
  // remembered). When full, expired ones go first, then arbitrary ones.
  std::size_t max_local_denial_entries = 65536;
  // Keys whose reservations (policy::reserve) are remembered at once, at most (each ~150
  // bytes and its key). When full, expired ones go; a key that finds no room asks the backend.
  std::size_t max_reservations = 65536;
  // Local mode (failure_mode::local): while the backend cannot answer, such policies are
  // decided in this process at limit ÷ instances. 0: the number of live instances, counted by
  // heartbeats every instance keeps in the backend (about one a second; the last count seen
  // is used during an outage; 1 until the first heartbeat answers). Otherwise a fixed count.
  int instances = 0;
  // After a backend failure, how long local-mode checks are decided locally without asking
  // the backend; then one check probes it, and its answer ends or extends the outage.
  std::chrono::milliseconds local_mode_probe_interval = std::chrono::milliseconds(250);
  // Testing only: the steady clock local denials count down on, in ms (only differences
  // matter); give it the backend's test clock. Empty: std::chrono::steady_clock, and a local
  // denial then ends 1 ms early, since Redis reads its TIME in whole ms independently of us.
  clock_fn clock;
};

}  // namespace floodgate
