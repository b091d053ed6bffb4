#include "memory/memory_backend.hpp"

#include <algorithm>
#include <bit>
#include <functional>

#include "floodgate/errors.hpp"

namespace floodgate::memory {

std::string storage_key(const policy& p, std::string_view key) {
  std::string out;
  const auto algo = to_string(p.algo());
  out.reserve(p.name().size() + algo.size() + key.size() + 2);
  out.append(p.name()).append(":").append(algo).append(":").append(key);
  return out;
}

memory_backend::memory_backend(memory_options options) : options_(std::move(options)) {
  const std::size_t n = std::bit_ceil(std::max<std::size_t>(options_.shards, 1));
  shards_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) shards_.push_back(std::make_unique<shard>());
}

std::int64_t memory_backend::now() const {
  return (options_.clock ? options_.clock() : system_now()).count();
}

memory_backend::shard& memory_backend::shard_of(const std::string& key) {
  return *shards_[std::hash<std::string>{}(key) & (shards_.size() - 1)];
}

// Called with the shard locked. Sweeps on a timer, and also when the shard has doubled since
// its last sweep, so a flood of new keys cannot outgrow memory between two timer sweeps.
void memory_backend::maybe_sweep(shard& s, std::int64_t now) {
  const bool grew = s.entries.size() > 2 * std::max<std::size_t>(s.size_after_sweep, 64);
  if (now < s.next_sweep && !grew) return;
  std::erase_if(s.entries, [now](const auto& kv) { return kv.second.expires_at <= now; });
  s.size_after_sweep = s.entries.size();
  s.next_sweep = now + options_.sweep_interval.count();
}

backend_reply memory_backend::check(std::span<const check_item> items) {
  const std::int64_t t = now();
  std::vector<std::string> keys;
  std::vector<shard*> locked;
  keys.reserve(items.size());
  for (const auto& item : items) {
    keys.push_back(storage_key(*item.policy, item.key));
    locked.push_back(&shard_of(keys.back()));
  }
  // Lock every shard involved, each once, in address order: no deadlock between check_alls.
  std::sort(locked.begin(), locked.end());
  locked.erase(std::unique(locked.begin(), locked.end()), locked.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(locked.size());
  for (shard* s : locked) locks.emplace_back(s->mutex);

  backend_reply reply;
  reply.decisions.reserve(items.size());
  std::vector<entry*> found(items.size(), nullptr);
  bool all_allowed = true;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& item = items[i];
    const auto params = core::params::of(*item.policy);
    auto& entries = shard_of(keys[i]).entries;
    auto it = entries.find(keys[i]);
    if (it != entries.end() && it->second.expires_at > t) found[i] = &it->second;
    const core::any_state empty = found[i] ? core::any_state{} : core::empty_state(item.policy->algo());
    const decision d = core::decide(found[i] ? found[i]->state : empty, t, params, item.cost);
    all_allowed = all_allowed && d.allowed;
    reply.decisions.push_back(d);
  }
  if (all_allowed) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& item = items[i];
      if (item.cost == 0) continue;
      const auto params = core::params::of(*item.policy);
      auto& entries = shard_of(keys[i]).entries;
      entry& e = found[i] ? *found[i]
                          : (entries[keys[i]] = entry{core::empty_state(item.policy->algo()), 0});
      core::commit(e.state, t, params, item.cost);
      e.expires_at = t + core::expiry(e.state, t, params);
    }
  }
  for (shard* s : locked) maybe_sweep(*s, t);
  return reply;
}

void memory_backend::async_check(std::span<const check_item> items, backend_handler handler) {
  handler(check(items));
}

void memory_backend::async_reset(std::string_view key, const policy& p, reset_handler handler) {
  const std::string k = storage_key(p, key);
  shard& s = shard_of(k);
  {
    std::lock_guard lock(s.mutex);
    s.entries.erase(k);
  }
  handler({});
}

std::size_t memory_backend::size() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mutex);
    n += s->entries.size();
  }
  return n;
}

}  // namespace floodgate::memory
