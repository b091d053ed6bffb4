#include "memory/memory_backend.hpp"

#include <algorithm>
#include <bit>
#include <functional>

#include "core/give_back.hpp"
#include "core/penalty.hpp"
#include "core/refund.hpp"
#include "core/reserve.hpp"
#include "core/state_unit.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::memory {

void assign_storage_key(std::string& out, const policy& p, std::string_view key) {
  const auto algo = to_string(p.algo());
  const core::state_unit unit(p);  // its units: a state is never read in others'
  out.clear();
  out.reserve(p.name().size() + algo.size() + unit.view().size() + key.size() + 2);
  out.append(p.name()).append(":").append(algo).append(unit.view()).append(":").append(key);
}

std::string block_key(const policy& p, std::string_view key) {
  std::string out;
  out.reserve(p.name().size() + key.size() + 4);
  out.append(p.name()).append(":bk:").append(key);
  return out;
}

bool is_block_key(std::string_view k) noexcept {
  const auto colon = k.find(':');  // policy names hold no ':'
  return colon != std::string_view::npos && k.substr(colon + 1).starts_with("bk:");
}

std::string storage_key(const policy& p, std::string_view key) {
  std::string out;
  assign_storage_key(out, p, key);
  return out;
}

memory_backend::memory_backend(memory_options options) : options_(std::move(options)) {
  if (options_.max_keys < 1) throw config_error("memory_options: max_keys must be at least 1");
  // No more shards than keys, so that every shard's share is at least 1 and they sum to at
  // most max_keys.
  const std::size_t n = std::min(std::bit_ceil(std::max<std::size_t>(options_.shards, 1)),
                                 std::bit_floor(options_.max_keys));
  max_per_shard_ = options_.max_keys / n;
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
  const bool grew = held(s) > 2 * std::max<std::size_t>(s.size_after_sweep, 64);
  if (now < s.next_sweep && !grew) return;
  drop_expired(s, now);
  s.next_sweep = now + options_.sweep_interval.count();
}

void memory_backend::drop_expired(shard& s, std::int64_t now) {
  std::erase_if(s.entries, [now](const auto& kv) { return kv.second.expires_at <= now; });
  std::erase_if(s.leases, [now](const auto& kv) { return core::expiry(kv.second, now) <= 0; });
  std::erase_if(s.refund_keys, [now](const auto& kv) { return kv.second.forget_at <= now; });
  s.size_after_sweep = held(s);
}

// Called with the shard locked, before a call's lookups (so no entry it holds can go). Rate
// limits' entries and concurrency limits' lease sets share the shard's share of max_keys. The
// expired go first, then the ones closest to expiry, which hold the least state: an evicted
// key starts again at full capacity (an evicted lease set frees its slots). Down to 7/8 of
// the share, so a flood of new keys pays O(1) per key.
// Penalty blocks go last, only when everything else is gone, closest to their end first: an
// evicted block would let a blocked key through at once, and other keys' checks (which an
// attacker can make at will) must not clear it. Only other blocks can, each of which costs its
// key a refusal.
void memory_backend::make_room(shard& s, std::size_t adding, std::int64_t now) {
  if (held(s) + adding <= max_per_shard_) return;
  drop_expired(s, now);
  const std::size_t target = max_per_shard_ - std::min(max_per_shard_, max_per_shard_ / 8 + adding);
  if (held(s) <= target) return;
  const auto lease_end = [now](const core::lease_set& l) { return now + core::expiry(l, now); };
  const auto entry_end = [](const entry& e) { return e.expires_at; };
  std::size_t dropped = 0;
  // Drops `drop` more of the entries `pick` chooses and the lease sets (with `leases`), those
  // closest to expiry first.
  const auto evict_closest = [&](std::size_t drop, auto pick, bool leases) {
    std::vector<std::int64_t> expiries;
    for (const auto& kv : s.entries)
      if (pick(kv.first)) expiries.push_back(kv.second.expires_at);
    if (leases)
      for (const auto& kv : s.leases) expiries.push_back(lease_end(kv.second));
    drop = std::min(drop, expiries.size());
    if (drop == 0) return;
    std::nth_element(expiries.begin(), expiries.begin() + static_cast<std::ptrdiff_t>(drop - 1),
                     expiries.end());
    const std::int64_t cutoff = expiries[drop - 1];
    const std::size_t stop_at = dropped + drop;
    const auto evict = [&](auto& map, auto expires_at, auto chosen) {
      for (auto it = map.begin(); it != map.end() && dropped < stop_at;) {
        if (chosen(it->first) && expires_at(it->second) <= cutoff) {
          it = map.erase(it);
          ++dropped;
        } else {
          ++it;
        }
      }
    };
    evict(s.entries, entry_end, pick);
    if (leases) evict(s.leases, lease_end, [](const std::string&) { return true; });
  };
  const auto block = [](const std::string& k) { return is_block_key(k); };
  const auto not_block = [](const std::string& k) { return !is_block_key(k); };
  const std::size_t drop = held(s) - target;
  evict_closest(drop, not_block, true);
  if (dropped < drop) evict_closest(drop - dropped, block, false);
  s.size_after_sweep = held(s);
  evictions_.fetch_add(dropped, std::memory_order_relaxed);
}

memory_backend::entry* memory_backend::live_entry(shard& s, const std::string& key,
                                                  std::int64_t now) {
  auto it = s.entries.find(key);
  return it != s.entries.end() && it->second.expires_at > now ? &it->second : nullptr;
}

decision memory_backend::decide(const entry* found, const check_item& item, std::int64_t now) {
  const auto params = core::params::of(*item.policy);
  if (found) return core::decide(found->state, now, params, item.cost);
  return core::decide(core::empty_state(item.policy->algo()), now, params, item.cost);
}

void memory_backend::commit(shard& s, const std::string& key, entry* found,
                            const check_item& item, std::int64_t now) {
  if (item.cost == 0) return;
  const auto params = core::params::of(*item.policy);
  // An expired entry still in the map is overwritten: its state no longer counts.
  entry& e = found ? *found : (s.entries[key] = entry{core::empty_state(item.policy->algo()), 0});
  core::commit(e.state, now, params, item.cost);
  e.expires_at = now + core::expiry(e.state, now, params);
}

backend_reply memory_backend::check_one(const check_item& item, std::int64_t now) {
  // Reused per thread, so a decision on a known key allocates nothing but the reply.
  thread_local std::string key;
  assign_storage_key(key, *item.policy, item.key);
  shard& s = shard_of(key);
  backend_reply reply;
  reply.decisions.reserve(1);
  std::lock_guard lock(s.mutex);
  make_room(s, 1, now);
  entry* found = live_entry(s, key, now);
  const decision d = decide(found, item, now);
  if (d.allowed) commit(s, key, found, item, now);
  reply.decisions.push_back(d);
  maybe_sweep(s, now);
  return reply;
}

backend_reply memory_backend::check(std::span<const check_item> items) {
  const std::int64_t t = now();
  if (items.size() == 1 && items.front().policy->block_for().count() == 0)
    return check_one(items.front(), t);
  // Per item its state key, then (with a penalty) its block key: entries of the same map.
  std::vector<std::string> keys;
  std::vector<shard*> shards;
  keys.reserve(2 * items.size());
  shards.reserve(2 * items.size());
  for (const auto& item : items) {
    keys.push_back(storage_key(*item.policy, item.key));
    shards.push_back(&shard_of(keys.back()));
  }
  for (const auto& item : items) {
    keys.push_back(item.policy->block_for().count() > 0 ? block_key(*item.policy, item.key)
                                                        : std::string());
    shards.push_back(keys.back().empty() ? nullptr : &shard_of(keys.back()));
  }
  // Lock every shard involved, each once, in address order: no deadlock between check_alls.
  std::vector<shard*> locked;
  for (shard* s : shards)
    if (s) locked.push_back(s);
  std::sort(locked.begin(), locked.end());
  locked.erase(std::unique(locked.begin(), locked.end()), locked.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(locked.size());
  for (shard* s : locked) locks.emplace_back(s->mutex);
  for (shard* s : locked) make_room(*s, 2 * items.size(), t);

  // All decided against the state before the call; all committed only if all are allowed.
  // A block starts for each item its own window refused, whatever the others say.
  // (Entry pointers stay valid across inserts: the map's nodes never move.)
  const std::size_t n = items.size();
  backend_reply reply;
  reply.decisions.reserve(n);
  std::vector<entry*> found(n, nullptr);
  std::vector<char> starts(n, 0);
  bool all_allowed = true;
  for (std::size_t i = 0; i < n; ++i) {
    found[i] = live_entry(*shards[i], keys[i], t);
    decision d = decide(found[i], items[i], t);
    if (shards[n + i]) {
      const std::int64_t bf = items[i].policy->block_for().count();
      entry* b = live_entry(*shards[n + i], keys[n + i], t);
      const std::int64_t left = b ? core::block_left(b->expires_at, t, bf) : 0;
      if (b && b->expires_at > t + bf) b->expires_at = t + bf;  // cut to block_for from now
      const auto r = core::penalize(d, items[i].cost, left, bf);
      d = r.d;
      starts[i] = r.starts;
    }
    reply.decisions.push_back(d);
    all_allowed = all_allowed && d.allowed;
  }
  if (all_allowed)
    for (std::size_t i = 0; i < n; ++i) commit(*shards[i], keys[i], found[i], items[i], t);
  for (std::size_t i = 0; i < n; ++i)
    if (starts[i])  // the state is unused: a block is its end time, expires_at
      shards[n + i]->entries[keys[n + i]] =
          entry{core::fixed_window_state{}, t + items[i].policy->block_for().count()};
  for (shard* s : locked) maybe_sweep(*s, t);
  return reply;
}

void memory_backend::async_check(std::span<const check_item> items, backend_handler handler) {
  backend_reply reply;
  try {
    reply = check(items);
  } catch (const std::exception&) {  // std::bad_alloc: answered, never thrown at the caller
    reply = {make_error_code(errc::internal_error), {}};
  }
  handler(std::move(reply));
}

void memory_backend::async_reset(std::string_view key, const policy& p, reset_handler handler) {
  for (const std::string& k : {storage_key(p, key), block_key(p, key)}) {
    shard& s = shard_of(k);
    std::lock_guard lock(s.mutex);
    s.entries.erase(k);
  }
  handler({});
}

void memory_backend::async_reserve(std::string_view key, const policy& p, std::int64_t wanted,
                                   std::function<void(reserve_reply)> handler) {
  const std::string k = storage_key(p, key);
  const std::int64_t t = now();
  reserve_reply reply;
  {
    shard& s = shard_of(k);
    std::lock_guard lock(s.mutex);
    make_room(s, 1, t);
    entry* found = live_entry(s, k, t);
    // min(wanted, what one request could be admitted now), committed as one request of it.
    core::any_state state = found ? found->state : core::empty_state(p.algo());
    const auto params = core::params::of(p);
    const core::grant g = core::reserve(state, t, params, wanted);
    reply.granted = g.units;
    reply.window = g.window;
    reply.spend_within = std::chrono::milliseconds{g.spend_within};
    if (reply.granted > 0) {
      entry& e = found ? *found : s.entries[k];
      e = entry{state, t + core::expiry(state, t, params)};
      found = &e;
    }
    reply.after = decide(found, {key, &p, 0}, t);
    // With nothing left, when one more unit will be: a check of 1, denied, says.
    if (reply.after.remaining == 0)
      reply.after.retry_after = decide(found, {key, &p, 1}, t).retry_after;
  }
  handler(std::move(reply));
}

void memory_backend::async_refund(const check_item& item, std::string_view idempotency_key,
                                  backend_handler handler) {
  const std::string k = storage_key(*item.policy, item.key);
  const auto params = core::params::of(*item.policy);
  const std::int64_t t = now();
  backend_reply reply;
  reply.decisions.reserve(1);
  {
    shard& s = shard_of(k);
    std::lock_guard lock(s.mutex);
    // A live marker is a replay: its first refund's amount, nothing given back now.
    const std::string marker =
        idempotency_key.empty() ? std::string() : k + '\n' + std::string(idempotency_key);
    const auto mark = marker.empty() ? s.refund_keys.end() : s.refund_keys.find(marker);
    reply.replayed = mark != s.refund_keys.end() && mark->second.forget_at > t;
    entry* found = live_entry(s, k, t);
    if (reply.replayed) {
      reply.refunded = mark->second.refunded;
    } else if (found) {
      reply.refunded = core::refund(found->state, t, params, item.cost);
      found->expires_at = t + core::expiry(found->state, t, params);
    }
    if (!marker.empty() && !reply.replayed)
      remember(s, marker, refund_mark{t + refund_key_memory(*item.policy).count(), reply.refunded},
               t);
    reply.decisions.push_back(
        decide(found && found->expires_at > t ? found : nullptr, {item.key, item.policy, 0}, t));
  }
  handler(std::move(reply));
}

void memory_backend::remember(shard& s, const std::string& marker, refund_mark mark,
                              std::int64_t now) {
  s.refund_keys.insert_or_assign(marker, mark);
  if (s.refund_keys.size() > max_per_shard_) {
    std::erase_if(s.refund_keys, [now](const auto& kv) { return kv.second.forget_at <= now; });
    if (s.refund_keys.size() > max_per_shard_)
      s.refund_keys.erase(std::min_element(
          s.refund_keys.begin(), s.refund_keys.end(),
          [](const auto& a, const auto& b) { return a.second.forget_at < b.second.forget_at; }));
  }
}

// As lua/give_back.lua: nothing outside the named window; a marker until it ends.
void memory_backend::async_give_back(std::string_view key, const policy& p, std::int64_t window,
                                     std::int64_t units, std::string_view id,
                                     backend_handler handler) {
  const std::string k = storage_key(p, key);
  const auto params = core::params::of(p);
  const std::int64_t t = now();
  backend_reply reply;
  if (core::floor_div(t, params.window) != window) return handler(std::move(reply));
  {
    shard& s = shard_of(k);
    std::lock_guard lock(s.mutex);
    const std::string marker = k + "\n\n" + std::string(id);
    if (auto mark = s.refund_keys.find(marker);
        mark != s.refund_keys.end() && mark->second.forget_at > t) {
      reply.refunded = mark->second.refunded;
      reply.replayed = true;
    } else {
      if (entry* found = live_entry(s, k, t))
        reply.refunded = core::give_back(found->state, t, params, window, units);
      remember(s, marker, refund_mark{(window + 1) * params.window, reply.refunded}, t);
    }
  }
  handler(std::move(reply));
}

namespace {

std::string lease_key(const concurrency_policy& p, std::string_view key) {
  std::string out;
  out.reserve(p.name().size() + key.size() + 4);
  out.append(p.name()).append(":cc:").append(key);
  return out;
}

}  // namespace

void memory_backend::async_acquire(std::string_view key, const concurrency_policy& p,
                                   std::string_view id, backend_handler handler) {
  const std::string k = lease_key(p, key);
  const std::int64_t t = now();
  backend_reply reply;
  {
    shard& s = shard_of(k);
    std::lock_guard lock(s.mutex);
    make_room(s, 1, t);
    reply.decisions.push_back(core::acquire(s.leases[k], t, p.limit(), p.lease().count(), id));
    maybe_sweep(s, t);
  }
  handler(std::move(reply));
}

void memory_backend::async_release(std::string_view key, const concurrency_policy& p,
                                   std::string_view id, std::chrono::milliseconds ttl,
                                   std::function<void(lease_result)> handler) {
  const std::string k = lease_key(p, key);
  const std::int64_t t = now();
  bool done = false;
  {
    shard& s = shard_of(k);
    std::lock_guard lock(s.mutex);
    if (auto it = s.leases.find(k); it != s.leases.end())
      done = core::release_or_renew(it->second, t, id, ttl.count());
  }
  handler({done, {}});
}

std::size_t memory_backend::size() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mutex);
    n += held(*s);
  }
  return n;
}

backend_stats memory_backend::stats() const noexcept {
  backend_stats out;
  out.keys = size();
  out.evictions = evictions_.load(std::memory_order_relaxed);
  return out;
}

}  // namespace floodgate::memory
