// Local denials: after the backend denied (policy, key, cost) with retry_after T, the same
// request is denied in this process, without a backend call, until T has passed (counted from
// the moment that call was sent) or the entry's maximum age, whichever comes first.
//
//   auto sent = clock();  auto epoch = cache.epoch();
//   if (auto d = cache.find(key, p, cost, sent)) return deny(*d);   // no backend call
//   ... backend answers `d` ... cache.learn(key, p, cost, sent, epoch, d);
//
// docs/algorithms.md ("Local denials") states the rules. Thread-safe: sharded, one mutex per
// shard; bounded by max_entries. Times are ms of one steady clock, chosen by the caller.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::detail {

// True when `a` and `b` name one state: the backends key a state by policy name, algorithm
// and the units its numbers are in (core/state_unit.hpp), and caller key; not by the limits,
// which may change between deployments.
bool same_state(const policy& a, const policy& b) noexcept;

class deny_cache {
 public:
  // Keys longer than this (bytes) are never remembered: it bounds an entry's memory.
  static constexpr std::size_t max_key_size = 256;

  // `max_entries` live entries at most; each lives at most `max_age` ms and ends `slack` ms
  // before its retry time (covers a backend clock read in whole ms independently of ours).
  deny_cache(std::size_t max_entries, std::int64_t max_age, std::int64_t slack);

  // Read before the backend call and handed to learn(): a reset in between voids the answer.
  std::uint64_t epoch() const noexcept { return epoch_.load(); }

  // The local denial of (key, p, cost) at `now`, if a live entry for exactly this request
  // proves the backend would deny it; nullopt otherwise (ask the backend). No allocation.
  std::optional<decision> find(std::string_view key, const policy& p, std::int64_t cost,
                               std::int64_t now);

  // What the backend decided for (key, p, cost) sent at `sent` (epoch read then): a denial is
  // remembered (replacing any other cost's entry), an admission that consumed forgets.
  void learn(std::string_view key, const policy& p, std::int64_t cost, std::int64_t sent,
             std::uint64_t epoch, const decision& d);

  // Drops the entry of (key, p's state) and voids answers in flight: a reset in this process.
  void reset(std::string_view key, const policy& p);
  // Drops the entry of (key, p's state), if any (its state is about to change).
  void forget(std::string_view key, const policy& p);

  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  // Checks denied by find() so far.
  std::uint64_t hits() const noexcept;

 private:
  struct entry {
    std::string key;
    policy pol;  // the whole policy: a same-named policy with another limit must not match
    std::int64_t cost;
    std::int64_t retry_at;    // sent + retry_after: what find() counts down to
    std::int64_t expires_at;  // min(retry_at - slack, sent + max_age): when find() stops
    std::int64_t reset_at;    // sent + reset_after
    std::int64_t limit, remaining;
  };
  struct alignas(64) shard {
    std::mutex mutex;
    std::unordered_map<std::uint64_t, entry> entries;  // by hash(policy state, key)
    std::atomic<std::uint64_t> hits{0};
  };

  static std::uint64_t hash(std::string_view key, const policy& p) noexcept;
  shard& shard_of(std::uint64_t h) noexcept { return *shards_[(h >> 40) & (shards_.size() - 1)]; }
  // With `s` locked and full: drops expired entries, then arbitrary ones down to 7/8.
  void make_room(shard& s, std::int64_t now);
  void erase(shard& s, std::unordered_map<std::uint64_t, entry>::iterator it);

  std::vector<std::unique_ptr<shard>> shards_;
  std::size_t per_shard_;
  std::int64_t max_age_;
  std::int64_t slack_;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> epoch_{0};
};

}  // namespace floodgate::detail
