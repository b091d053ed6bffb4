#include "deny_cache.hpp"

#include <algorithm>
#include <bit>
#include <functional>

#include "core/state_unit.hpp"

namespace floodgate::detail {
namespace {

constexpr std::size_t max_shards = 64;

}  // namespace

deny_cache::deny_cache(std::size_t max_entries, std::int64_t max_age, std::int64_t slack)
    : max_age_(max_age), slack_(slack) {
  // Fewer shards than entries would leave shards that can hold nothing.
  const std::size_t n = std::min(max_shards, std::bit_floor(std::max<std::size_t>(max_entries, 1)));
  per_shard_ = std::max<std::size_t>(max_entries / n, 1);
  shards_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) shards_.push_back(std::make_unique<shard>());
}

bool same_state(const policy& a, const policy& b) noexcept {
  return a.algo() == b.algo() && a.name() == b.name() &&
         core::state_unit(a).view() == core::state_unit(b).view();
}

std::uint64_t deny_cache::hash(std::string_view key, const policy& p) noexcept {
  // The state's identity (name, algorithm, key), as the backends key it.
  std::uint64_t h = std::hash<std::string_view>{}(key);
  h ^= std::hash<std::string_view>{}(p.name()) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= (static_cast<std::uint64_t>(p.algo()) + 1) * 0xff51afd7ed558ccdULL;
  return h ^ (h >> 29);
}

std::optional<decision> deny_cache::find(std::string_view key, const policy& p,
                                         std::int64_t cost, std::int64_t now) {
  if (size_.load(std::memory_order_relaxed) == 0) return std::nullopt;  // the common case
  const std::uint64_t h = hash(key, p);
  shard& s = shard_of(h);
  std::lock_guard lock(s.mutex);
  const auto it = s.entries.find(h);
  if (it == s.entries.end()) return std::nullopt;
  const entry& e = it->second;
  if (now >= e.expires_at) {
    erase(s, it);
    return std::nullopt;
  }
  // Only the very request that was denied: a smaller cost may fit earlier, and a larger one's
  // exact retry time is unknown here.
  if (e.cost != cost || e.key != key || !(e.pol == p)) return std::nullopt;
  s.hits.fetch_add(1, std::memory_order_relaxed);
  decision d;
  d.allowed = false;
  d.limit = e.limit;
  d.remaining = e.remaining;
  d.reset_after = std::chrono::milliseconds{std::max<std::int64_t>(e.reset_at - now, 0)};
  d.retry_after = std::chrono::milliseconds{e.retry_at - now};
  return d;
}

void deny_cache::learn(std::string_view key, const policy& p, std::int64_t cost,
                       std::int64_t sent, std::uint64_t epoch, const decision& d) {
  if (d.allowed) {
    if (cost > 0) forget(key, p);  // it consumed: a remembered retry time may now be too early
    return;
  }
  const std::int64_t retry = d.retry_after.count();
  if (cost <= 0 || retry <= 0 || d.retry_after == decision::never || key.size() > max_key_size)
    return;
  const std::int64_t expires_at = std::min(sent + retry - slack_, sent + std::min(retry, max_age_));
  if (expires_at <= sent) return;
  const std::uint64_t h = hash(key, p);
  shard& s = shard_of(h);
  std::lock_guard lock(s.mutex);
  // Under the lock, so a reset() either voids this answer or erases what it writes.
  if (epoch_.load() != epoch) return;
  auto it = s.entries.find(h);
  if (it == s.entries.end() && s.entries.size() >= per_shard_) make_room(s, sent);
  entry e{std::string(key), p, cost, sent + retry, expires_at,
          sent + d.reset_after.count(), d.limit, d.remaining};
  if (it != s.entries.end()) {
    it->second = std::move(e);  // a hash collision or another cost: the newest denial wins
  } else {
    s.entries.emplace(h, std::move(e));
    size_.fetch_add(1, std::memory_order_relaxed);
  }
}

void deny_cache::reset(std::string_view key, const policy& p) {
  epoch_.fetch_add(1);
  const std::uint64_t h = hash(key, p);
  shard& s = shard_of(h);
  std::lock_guard lock(s.mutex);
  if (const auto it = s.entries.find(h); it != s.entries.end()) erase(s, it);
}

void deny_cache::forget(std::string_view key, const policy& p) {
  if (size_.load(std::memory_order_relaxed) == 0) return;
  const std::uint64_t h = hash(key, p);
  shard& s = shard_of(h);
  std::lock_guard lock(s.mutex);
  const auto it = s.entries.find(h);
  if (it != s.entries.end() && it->second.key == key && same_state(it->second.pol, p))
    erase(s, it);
}

std::uint64_t deny_cache::hits() const noexcept {
  std::uint64_t sum = 0;
  for (const auto& s : shards_) sum += s->hits.load(std::memory_order_relaxed);
  return sum;
}

void deny_cache::erase(shard& s, std::unordered_map<std::uint64_t, entry>::iterator it) {
  s.entries.erase(it);
  size_.fetch_sub(1, std::memory_order_relaxed);
}

void deny_cache::make_room(shard& s, std::int64_t now) {
  const std::size_t before = s.entries.size();
  std::erase_if(s.entries, [now](const auto& kv) { return now >= kv.second.expires_at; });
  // Evicting well below the cap keeps a flood of distinct keys at O(1) per insert.
  const std::size_t target = per_shard_ - (per_shard_ + 7) / 8;
  for (auto it = s.entries.begin(); it != s.entries.end() && s.entries.size() > target;)
    it = s.entries.erase(it);
  size_.fetch_sub(before - s.entries.size(), std::memory_order_relaxed);
}

}  // namespace floodgate::detail
