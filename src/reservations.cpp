#include "reservations.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <random>

#include "core/reserve.hpp"
#include "failure.hpp"

namespace floodgate::detail {
namespace {

// GCC's 128-bit integer, for a product of two 64-bit counts (__extension__: no -Wpedantic).
__extension__ typedef __int128 wide;

constexpr std::size_t shard_count = 16;

}  // namespace

reservations::reservations(std::shared_ptr<backend> b, std::function<std::int64_t()> steady_ms,
                           std::size_t max_entries)
    : backend_(std::move(b)),
      steady_ms_(std::move(steady_ms)),
      max_per_shard_(std::max<std::size_t>(1, max_entries / shard_count)),
      shards_(shard_count) {
  std::random_device rd;
  const std::uint64_t r = (std::uint64_t{rd()} << 32) ^ rd();
  static constexpr char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) id_prefix_.push_back(hex[(r >> (4 * i)) & 15]);
  id_prefix_.push_back('.');
}

reservations::~reservations() {
  const std::int64_t now = steady_ms_();
  std::vector<unspent> units;
  for (shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    for (auto& [name, e] : s.entries) take_unspent(name, e, now, units);
  }
  if (units.empty()) return;
  struct waiting {
    std::mutex mutex;
    std::condition_variable answered;
    std::size_t left;
  };
  auto w = std::make_shared<waiting>();
  w->left = units.size();
  give_back(units, [w] {
    std::lock_guard lock(w->mutex);
    if (--w->left == 0) w->answered.notify_all();
  });
  std::unique_lock lock(w->mutex);
  w->answered.wait_for(lock, std::chrono::milliseconds{give_back_wait_ms},
                       [&] { return w->left == 0; });
}

void reservations::take_unspent(const std::string& name, const entry& e, std::int64_t now,
                                std::vector<unspent>& out) {
  // Only a windowed grant can be given back (docs/algorithms.md): once a bucket's or a log's
  // state moved on it no longer says which units are the grant's.
  if (e.left > 0 && now < e.window_end && core::windowed(e.rule.algo()))
    out.push_back({name.substr(e.rule.name().size() + 1),
                   e.rule,
                   e.window,
                   e.left,
                   e.grant_id,
                   {},
                   e.counters->given_back});
}

void reservations::give_back(std::vector<unspent>& units, const std::function<void()>& done) {
  for (unspent& u : units) {
    const std::string id = id_prefix_ + std::to_string(u.grant_id) + u.suffix;
    backend_->async_give_back(
        u.key, u.rule, u.window, u.units, id,
        [given = given_back_, rule = u.given, done](backend_reply r) {
          if (!r.error && !r.replayed) {
            given->fetch_add(static_cast<std::uint64_t>(r.refunded), std::memory_order_relaxed);
            if (rule)
              rule->fetch_add(static_cast<std::uint64_t>(r.refunded), std::memory_order_relaxed);
          }
          if (done) done();
        });
  }
}

reservations::rule_counters* reservations::counters_for(shard& s, const policy& p) {
  if (auto it = s.rules.find(p.name()); it != s.rules.end()) return it->second.get();
  std::string name;
  given_back_ptr given;
  {
    std::lock_guard lock(rules_mutex_);
    // Bounded: rules are configuration, but a library user may name policies at will.
    auto it = rules_.find(p.name());
    if (it == rules_.end() && rules_.size() >= max_rules)
      it = rules_.find(std::string(other_rules));
    if (it == rules_.end())
      it = rules_
               .emplace(rules_.size() < max_rules ? p.name() : std::string(other_rules),
                        std::make_shared<std::atomic<std::uint64_t>>(0))
               .first;
    name = it->first;
    given = it->second;
  }
  auto& c = s.rules[name];
  if (!c) c = std::make_unique<rule_counters>(rule_counters{0, 0, 0, std::move(given)});
  return c.get();
}

std::uint64_t reservations::sum(std::uint64_t rule_counters::*field) const {
  std::uint64_t n = 0;
  for (shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    for (const auto& [name, c] : s.rules) n += (*c).*field;
  }
  return n;
}

std::uint64_t reservations::taken() const {
  return sum(&rule_counters::taken);
}

std::uint64_t reservations::units() const {
  return sum(&rule_counters::units);
}

std::uint64_t reservations::spent() const {
  std::uint64_t n = batches_spent_.load(std::memory_order_relaxed);
  for (shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    n += s.spent;
  }
  return n;
}

std::vector<rule_reservation_stats> reservations::by_rule() const {
  std::unordered_map<std::string, rule_reservation_stats> sums;
  {
    std::lock_guard lock(rules_mutex_);
    for (const auto& [name, given] : rules_)
      sums[name] = {name, 0, 0, 0, given->load(std::memory_order_relaxed)};
  }
  for (shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    for (const auto& [name, c] : s.rules) {
      auto& r = sums[name];
      r.rule = name;
      r.reservations += c->taken;
      r.reserved_units += c->units;
      r.reserved_decisions += c->spent;
    }
  }
  std::vector<rule_reservation_stats> out;
  out.reserve(sums.size());
  for (auto& [name, r] : sums) out.push_back(std::move(r));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rule < b.rule; });
  return out;
}

std::string reservations::name_of(std::string_view key, const policy& p) {
  std::string out;
  out.reserve(p.name().size() + 1 + key.size());
  out.append(p.name()).append(1, '\n').append(key);
  return out;
}

reservations::shard& reservations::shard_of(const std::string& name) {
  return shards_[std::hash<std::string>{}(name) % shards_.size()];
}

check_result reservations::admitted(const entry& e, const policy& p, std::int64_t now) {
  check_result r;
  r.outcome = outcome::allowed;
  r.reserved = true;
  r.decision.allowed = true;
  r.decision.limit = p.capacity();
  r.decision.remaining = e.left + std::max<std::int64_t>(0, e.key_left);
  r.decision.reset_after = std::chrono::milliseconds{std::max<std::int64_t>(0, e.reset_at - now)};
  return r;
}

reservations::plan reservations::plan_check(std::string_view key, const policy& p,
                                             std::int64_t cost) {
  plan out;
  if (p.reserve() == 0 || cost < 1 || cost > p.reserve()) return out;
  std::string name = name_of(key, p);
  shard& s = shard_of(name);
  const std::int64_t now = steady_ms_();
  std::unique_lock lock(s.mutex);
  auto it = s.entries.find(name);
  if (it == s.entries.end()) {
    if (s.entries.size() >= max_per_shard_) {
      // Entries past their grant's end go; what they hold of a window still current goes back
      // (sent under the lock, as below: a give-back's handler takes no lock of ours).
      std::vector<unspent> back;
      std::erase_if(s.entries, [&](auto& kv) {
        if (kv.second.taking || now < kv.second.until) return false;
        take_unspent(kv.first, kv.second, now, back);
        return true;
      });
      give_back(back, {});
      if (s.entries.size() >= max_per_shard_) return out;  // bounded: ask the backend
    }
    it = s.entries.emplace(name, entry{p, counters_for(s, p)}).first;
  }
  entry& e = it->second;
  if (!(e.rule == p)) {
    // Reloaded: units of another policy are not this one's; they go back. Sent under the lock
    // (rare; a give-back's handler takes no lock of ours).
    std::vector<unspent> back;
    take_unspent(it->first, e, now, back);
    give_back(back, {});
    e = entry{p, counters_for(s, p)};
  }
  const bool windowed = core::windowed(p.algo());
  if (!windowed) {
    // This process's rate for the key, over the last span a grant could be spent in.
    if (e.life == 0)
      e.life = std::min(p.reserve_for().count(), core::spend_span(p.algo(), core::params::of(p)));
    const std::int64_t at = now / e.life;
    if (at != e.recent_at) {
      e.before = at == e.recent_at + 1 ? e.recent : 0;
      e.recent = 0;
      e.recent_at = at;
    }
    // Saturating: a flooded key of large costs (denied ones count too) cannot overflow it.
    constexpr std::int64_t most = std::int64_t{1} << 61;
    e.recent = cost >= most - e.recent ? most : e.recent + cost;
  }
  if (now < e.until && e.left >= cost) {
    e.left -= cost;
    out.answer = admitted(e, p, now);
    ++e.counters->spent;
    ++s.spent;
    out.step = plan::spent;
    return out;
  }
  if (e.taking) return out;  // one reservation at a time; meanwhile checks ask the backend
  // token_bucket, gcra, sliding_log: none within a window of the key being at its limit (a
  // denial, or an answer or grant that left nothing). Their units held elsewhere deny here until
  // spent (and sliding_log's count a spend span longer), so on a key at its limit each grant
  // denies checks the definition admits; one check at a time is exact there, and the deny cache
  // answers its denials. (Before sizing a grant: on a flooded key every check comes here.)
  if (!windowed && now - e.denied_at < p.window().count()) return out;
  // A window's grant can be given back and ends with its window, so what the key had left is
  // stale once a grant ended. The others' grants cannot be given back, and a sliding_log grant
  // counts a spend span longer than its units would: their figure is kept, refreshed by every
  // backend answer (observe).
  if (now >= e.until && windowed) e.key_left = -1;
  std::int64_t wanted = 0;
  if (windowed) {
    if (e.granted > 0) {
      // Sized from how the last one went: ran out early, twice as many; else what was spent.
      e.next_size = now < e.until ? 2 * e.granted : std::max<std::int64_t>(1, e.granted - e.left);
      e.granted = 0;
    }
    wanted = std::clamp(e.next_size, cost, p.reserve());
  } else {
    // A third of what this process was asked for in the last `life` ms (the span before
    // weighed by its part within `life` of now), so the grant's units, which cannot be given
    // back, are spent before it ends but for a rare lull (Poisson arrivals at 3 × a grant of 2
    // leave one unspent 0.25 % of the time). A bucket's unit left unspent is lost until the
    // bucket is full again, never on a key kept at its limit: every later denial of that key
    // is one its definition admits. The doubling this replaces (after one quick repeat)
    // stranded a unit in 3 of 4 grants of 2 on keys checked a few times a second. A grant of
    // only the request buys nothing over a check (and a sliding_log one counts longer).
    const std::int64_t within = e.life - now % e.life;
    // (The product in 128 bits: `before` is up to 2^61; the sum stays below 2^62.)
    const std::int64_t seen =
        e.recent + static_cast<std::int64_t>(static_cast<wide>(e.before) * within / e.life);
    wanted = std::min(p.reserve(), seen / 3);
    // sliding_log: never from the last quarter of the log. Every unit of a grant counts until
    // the end of its spend span plus W, so on a key that then sits at its limit each one
    // denies, about W after it was spent, the checks of up to a spend span that the
    // definition admits; a key drained by its demand stops taking grants a quarter before.
    if (p.algo() == algorithm::sliding_log && e.key_left >= 0)
      wanted = std::min(wanted, e.key_left - p.capacity() / 4);
  }
  // No more than this process spends before the window ends (at its rate over the last grant):
  // units left at the end are lost to every process, and sliding_window weighs them on the
  // next window too. Window ends repeat every W from the last grant's (estimated early).
  if (e.window_end > 0 && windowed) {
    const std::int64_t w = p.window().count();
    std::int64_t end = e.window_end;
    if (now >= end) end += w * ((now - end) / w + 1);
    const std::int64_t left = end - now, span = p.reserve_for().count();
    if (left < span)
      wanted = std::min(wanted, std::max(cost, (e.next_size * left + span - 1) / span));
  }
  // Never more than half of what the key had left at the last answer (a grant's, or the
  // backend's to a check that went there): a nearly exhausted key is not hoarded, and its last
  // units are decided by the backend one check at a time, each answer refreshing what is left
  // (a stale low figure costs one backend check, never a grant too large).
  if (e.key_left >= 0) wanted = std::min(wanted, e.key_left / 2);
  if (wanted < cost || (!windowed && wanted == cost)) return out;  // (a grant of cost: above)
  e.taking = true;
  out.step = plan::take;
  out.name = std::move(name);
  out.wanted = wanted;
  out.sent = now;
  return out;
}

void reservations::take(std::string_view key, const policy& p, std::int64_t cost, plan& next,
                        std::function<void(check_result)> handler) {
  // A weak reference: the limiter's end, not a reply in flight, ends its reservations (and
  // gives back what they hold, on the caller's thread rather than a backend's).
  backend_->async_reserve(
      key, p, next.wanted,
      [weak = weak_from_this(), name = std::move(next.name), p, cost, sent = next.sent,
       handler = std::move(handler)](reserve_reply r) mutable {
        if (auto self = weak.lock())
          return self->granted(name, p, cost, sent, r, std::move(handler));
        // The limiter is gone: the grant is spent on this request or lost (never more).
        check_result out;
        if (r.error) return handler(failed_check(r.error, failure_decision(p)));
        out.decision = r.after;
        out.outcome = r.granted >= cost ? outcome::allowed : outcome::over_limit;
        out.decision.allowed = out.outcome == outcome::allowed;
        if (!out.decision.allowed && out.decision.retry_after.count() == 0)
          out.decision.retry_after = std::chrono::milliseconds{1};
        handler(std::move(out));
      });
}

void reservations::granted(const std::string& name, const policy& p, std::int64_t cost,
                           std::int64_t sent, const reserve_reply& r,
                           std::function<void(check_result)> handler) {
  if (r.error) {
    {
      shard& s = shard_of(name);
      std::lock_guard lock(s.mutex);
      if (auto it = s.entries.find(name); it != s.entries.end()) it->second.taking = false;
    }
    return handler(failed_check(r.error, failure_decision(p)));
  }
  const std::int64_t now = steady_ms_();
  check_result out;
  std::vector<unspent> back;
  {
    shard& s = shard_of(name);
    std::lock_guard lock(s.mutex);
    auto it = s.entries.find(name);
    if (it != s.entries.end() && !(it->second.rule == p))
      take_unspent(name, it->second, now, back);  // reloaded meanwhile
    if (it == s.entries.end() || !(it->second.rule == p))
      it = s.entries.insert_or_assign(name, entry{p, counters_for(s, p)}).first;  // (a reset)
    entry& e = it->second;
    e.taking = false;
    ++e.counters->taken;
    e.counters->units += static_cast<std::uint64_t>(r.granted);
    // Units left from an earlier reservation are given back, not added: the new grant may have
    // been decided in the next window, and they belong to the one before (a give-back names
    // that window, so it returns nothing once it has ended).
    take_unspent(name, e, now, back);
    e.window = r.window;
    e.grant_id = grant_ids_.fetch_add(1, std::memory_order_relaxed) + 1;
    e.granted = r.granted;
    e.left = r.granted;
    e.key_left = r.after.remaining;
    e.reset_at = sent + r.after.reset_after.count();
    // The backend says until when the grant may be spent (the end of the window its units were
    // recorded in), from its own now: counted from `sent`, before the call, it errs early.
    e.window_end = sent + r.spend_within.count();
    e.until = std::min(e.window_end, sent + p.reserve_for().count());
    if (r.after.remaining == 0) e.denied_at = now;  // the grant took the key's last units
    if (r.granted >= cost && now < e.until) {
      e.left -= cost;
      out = admitted(e, p, now);
      if (cost > 0) {
        ++e.counters->spent;
        ++s.spent;
      }
    } else {
      // Less than the request is left (the backend would deny it too), or the grant came too
      // late to spend: denied, with the key's own answer.
      e.denied_at = now;
      out.outcome = outcome::over_limit;
      out.decision = r.after;
      out.decision.allowed = false;
      out.decision.remaining = r.after.remaining + e.left;
      if (out.decision.retry_after.count() == 0)
        out.decision.retry_after = std::chrono::milliseconds{1};
    }
  }
  if (!back.empty()) give_back(back, {});
  handler(std::move(out));
}

bool reservations::check_all(std::span<const check_item> items,
                             std::function<void(multi_check_result)>& handler) {
  const std::int64_t now = steady_ms_();
  std::vector<held> set_aside;
  std::vector<decision> decisions(items.size());
  std::vector<check_item> others;
  std::vector<std::size_t> other_at;
  bool all_held = true;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const check_item& item = items[i];
    const policy& p = *item.policy;
    if (p.reserve() == 0 || item.cost < 1 || item.cost > p.reserve()) {
      others.push_back(item);
      other_at.push_back(i);
      continue;
    }
    std::string name = name_of(item.key, p);
    shard& s = shard_of(name);
    std::lock_guard lock(s.mutex);
    auto it = s.entries.find(name);
    if (it == s.entries.end() || !(it->second.rule == p) || now >= it->second.until ||
        it->second.left < item.cost) {
      all_held = false;
      continue;
    }
    entry& e = it->second;
    e.left -= item.cost;
    decisions[i] = admitted(e, p, now).decision;
    ++e.counters->spent;
    set_aside.push_back(
        {std::move(name), p, e.grant_id, e.window, e.window_end, item.cost, e.counters});
  }
  if (!all_held) {
    release(set_aside);
    // A reservation for the next calls (a check of cost 0 takes it and answers nothing), so
    // a key hot in multi-item calls alone is answered from reserved units too.
    for (const check_item& item : items) {
      const policy& p = *item.policy;
      if (p.reserve() == 0 || item.cost < 1 || item.cost > p.reserve()) continue;
      plan next = plan_check(item.key, p, item.cost);
      if (next.step == plan::spent) {  // units arrived meanwhile: not this call's to spend
        shard& s = shard_of(name_of(item.key, p));
        std::lock_guard lock(s.mutex);
        if (auto it = s.entries.find(name_of(item.key, p)); it != s.entries.end()) {
          it->second.left += item.cost;
          --it->second.counters->spent;
        }
        --s.spent;
      } else if (next.step == plan::take) {
        take(item.key, p, 0, next, [](check_result) {});
      }
    }
    return false;
  }
  batches_spent_.fetch_add(1, std::memory_order_relaxed);
  if (others.empty()) {
    multi_check_result r;
    r.outcome = outcome::allowed;
    r.decisions = std::move(decisions);
    handler(std::move(r));
    return true;
  }
  // The other items decide the batch: spent if they are all admitted, else set back.
  std::vector<decision> on_failure;
  for (const auto& item : items) on_failure.push_back(failure_decision(*item.policy));
  backend_->async_check(others, [weak = weak_from_this(), set_aside = std::move(set_aside),
                                 decisions = std::move(decisions), other_at = std::move(other_at),
                                 on_failure = std::move(on_failure),
                                 handler = std::move(handler)](backend_reply reply) mutable {
    multi_check_result r;
    if (!reply.error && reply.decisions.size() != other_at.size())
      reply.error = errc::protocol_error;
    bool all = !reply.error;
    if (reply.error) {
      r.outcome = failed_outcome(reply.error);
      r.error = reply.error;
      if (r.outcome == outcome::backend_error) r.decisions = std::move(on_failure);
    } else {
      for (std::size_t j = 0; j < other_at.size(); ++j) {
        decisions[other_at[j]] = reply.decisions[j];
        all = all && reply.decisions[j].allowed;
      }
      r.outcome = all ? outcome::allowed : outcome::over_limit;
      r.decisions = std::move(decisions);
    }
    if (!all) {
      if (auto self = weak.lock()) {  // (else the limiter is gone: the units are lost, never more)
        self->release(set_aside);
        self->batches_spent_.fetch_sub(1, std::memory_order_relaxed);
      }
    }
    handler(std::move(r));
  });
  return true;
}

void reservations::release(std::vector<held>& units) {
  const std::int64_t now = steady_ms_();
  std::vector<unspent> back;
  for (held& h : units) {
    shard& s = shard_of(h.name);
    std::lock_guard lock(s.mutex);
    --h.counters->spent;  // not spent after all
    auto it = s.entries.find(h.name);
    if (it != s.entries.end() && it->second.rule == h.rule && it->second.grant_id == h.grant_id) {
      it->second.left += h.cost;  // still its grant: spendable again
    } else if (now < h.window_end && core::windowed(h.rule.algo())) {
      // Its grant was replaced (and gave back what it still held): these go back on their own.
      back.push_back({h.name.substr(h.rule.name().size() + 1), h.rule, h.window, h.cost, h.grant_id,
                      ".r" + std::to_string(release_ids_.fetch_add(1) + 1), h.counters->given_back});
    }
  }
  units.clear();
  if (!back.empty()) give_back(back, {});
}

std::size_t reservations::keep_only(std::span<const policy> rules) {
  const std::int64_t now = steady_ms_();
  std::vector<unspent> back;
  std::size_t dropped = 0;
  // The rules by name: an entry's is found in one lookup, not a walk of them all.
  std::unordered_multimap<std::string_view, const policy*> by_name;
  for (const policy& p : rules) by_name.emplace(p.name(), &p);
  const auto kept = [&](const policy& p) {
    auto [first, last] = by_name.equal_range(p.name());
    return std::any_of(first, last, [&](const auto& kv) { return *kv.second == p; });
  };
  for (shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    for (auto it = s.entries.begin(); it != s.entries.end();) {
      entry& e = it->second;
      if (kept(e.rule)) {
        ++it;
        continue;
      }
      take_unspent(it->first, it->second, now, back);  // a removed rule's
      ++dropped;
      e.left = 0;
      // (One being taken stays: its grant finds its entry and is spent or lost.)
      it = e.taking ? std::next(it) : s.entries.erase(it);
    }
  }
  give_back(back, {});
  return dropped;
}

void reservations::observe(std::string_view key, const policy& p, const decision& d) {
  if (core::windowed(p.algo())) return;  // (their figure ends with their grant: plan_check)
  const std::string name = name_of(key, p);
  shard& s = shard_of(name);
  const std::int64_t now = steady_ms_();
  std::lock_guard lock(s.mutex);
  if (auto it = s.entries.find(name); it != s.entries.end() && it->second.rule == p) {
    it->second.key_left = d.remaining;
    if (!d.allowed || d.remaining == 0) it->second.denied_at = now;  // at its limit
  }
}

void reservations::forget(std::string_view key, const policy& p) {
  const std::string name = name_of(key, p);
  shard& s = shard_of(name);
  std::lock_guard lock(s.mutex);
  if (auto it = s.entries.find(name); it != s.entries.end() && !it->second.taking)
    s.entries.erase(it);
  else if (it != s.entries.end())
    it->second.left = 0;
}

}  // namespace floodgate::detail
