// The in-process backend: the default for a single node and the reference the Redis scripts
// are tested against. Thread-safe; keys are spread over shards, each with its own mutex, so
// unrelated keys rarely contend. State that no longer matters is dropped (see
// memory_options::sweep_interval), so memory follows the live keys, not every key ever seen.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/lease_set.hpp"
#include "core/step.hpp"
#include "floodgate/backend.hpp"
#include "floodgate/options.hpp"
#include "floodgate/semaphore.hpp"

namespace floodgate::memory {

class memory_backend final : public backend, public lease_backend {
 public:
  explicit memory_backend(memory_options options = {});

  void async_check(std::span<const check_item> items, backend_handler handler) override;
  void async_reset(std::string_view key, const policy& p, reset_handler handler) override;
  void async_reserve(std::string_view key, const policy& p, std::int64_t wanted,
                     std::function<void(reserve_reply)> handler) override;
  void async_refund(const check_item& item, std::string_view idempotency_key,
                    backend_handler handler) override;
  void async_give_back(std::string_view key, const policy& p, std::int64_t window,
                       std::int64_t units, std::string_view id, backend_handler handler) override;
  void async_acquire(std::string_view key, const concurrency_policy& p, std::string_view id,
                     backend_handler handler) override;
  void async_release(std::string_view key, const concurrency_policy& p, std::string_view id,
                     std::chrono::milliseconds ttl,
                     std::function<void(lease_result)> handler) override;
  bool healthy() const noexcept override { return true; }
  std::string_view kind() const noexcept override { return "memory"; }

  // Synchronous core of async_check (the memory backend never waits).
  backend_reply check(std::span<const check_item> items);
  // Keys currently held, lease sets included (for tests and metrics).
  std::size_t size() const;
  backend_stats stats() const noexcept override;

 private:
  struct entry {
    core::any_state state;
    std::int64_t expires_at;  // ms; the state is empty from then on
  };
  struct refund_mark {
    std::int64_t forget_at;  // ms
    std::int64_t refunded;   // the cost that refund gave back
  };
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, entry> entries;
    // Concurrency limits' leases, under "<name>:cc:<key>"; a set with none live is swept.
    std::unordered_map<std::string, core::lease_set> leases;
    // Refunds' idempotency keys, "<state key>\n<idempotency key>" -> when forgotten (ms) and
    // what that refund gave back; at most the shard's share of max_keys, the closest to being
    // forgotten going first. Give-backs' ids likewise, as "<state key>\n\n<id>".
    std::unordered_map<std::string, refund_mark> refund_keys;
    std::int64_t next_sweep = 0;
    std::size_t size_after_sweep = 0;
  };

  std::int64_t now() const;
  shard& shard_of(const std::string& key);
  // check() of one item: one shard, no per-call containers but the reply's.
  backend_reply check_one(const check_item& item, std::int64_t now);
  // With the shard `s` locked: the entry under `key` that is still live, or null; the decision
  // against it (null: empty state); writing the allowed item's new state.
  static entry* live_entry(shard& s, const std::string& key, std::int64_t now);
  static decision decide(const entry* found, const check_item& item, std::int64_t now);
  static void commit(shard& s, const std::string& key, entry* found, const check_item& item,
                     std::int64_t now);
  void maybe_sweep(shard& s, std::int64_t now);
  static void drop_expired(shard& s, std::int64_t now);
  // Keys a shard holds: rate limits' entries and concurrency limits' lease sets.
  static std::size_t held(const shard& s) { return s.entries.size() + s.leases.size(); }
  // With `s` locked: room for `adding` more keys (entries or lease sets) within the shard's
  // share of max_keys.
  void make_room(shard& s, std::size_t adding, std::int64_t now);
  // With `s` locked: remembers a refund's or give-back's marker, within the shard's share.
  void remember(shard& s, const std::string& marker, refund_mark mark, std::int64_t now);

  memory_options options_;
  std::size_t max_per_shard_;
  std::vector<std::unique_ptr<shard>> shards_;
  std::atomic<std::uint64_t> evictions_{0};
};

// The storage key of (policy, caller key): unambiguous because policy names hold no ':'.
std::string storage_key(const policy& p, std::string_view key);
// The key of (policy, caller key)'s penalty: its end time, as an entry's expires_at. Not a
// state key: no algorithm is named "bk".
std::string block_key(const policy& p, std::string_view key);
// Whether an entry's key is a block_key: blocks are evicted only when nothing else is left.
bool is_block_key(std::string_view k) noexcept;
// The same, into `out` (replacing its contents; reuses its capacity).
void assign_storage_key(std::string& out, const policy& p, std::string_view key);

}  // namespace floodgate::memory
