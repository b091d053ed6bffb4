// Run-time overrides: per-key policies an operator sets while floodgated runs, each with an
// expiry so that a temporary raise cannot be forgotten. The rules store in Redis feeds it
// (`floodgate override set RULE KEY --limit N --for 1h`); it decides before the rule's static
// overrides (config/override_table.hpp), with the same precedence among its own entries: the
// exact key, then the longest prefix, expired entries passed over. RULE is a rules file's rule
// or an Envoy rate_limit ("envoy:DOMAIN:KEY=VALUE,...": envoy/envoy_rule_names.hpp), which a
// caller's rule_lookup finds; an entry is indexed by its rule's policy name, which is what the
// HTTP handler, the inspector and the Envoy service hold when they resolve a key.
//
//   runtime_overrides live;
//   auto err = live.set(cfg, {"api", "vip", match_kind::exact, {.limit = 1000}, now_ms +
//   3'600'000},
//                       now_ms);                          // nullopt, or why not
//   auto snap = live.current();                          // keep while the decision runs
//   const rule* r = snap->resolve(*cfg.find("api"), "vip", now_ms);   // nullptr: none applies
//   live.rebind(new_cfg, now_ms);                        // after a reload
//
// Thread-safe: writers serialise on a mutex and publish a new immutable snapshot; readers load
// it without a lock. Bounded: at most max_entries live entries (expired ones are dropped on
// every write), each key at most max_override_key_size bytes. Times are ms since the Unix
// epoch (wall clock: instances sharing a table agree on them).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "config/override_table.hpp"

namespace floodgate::service {

// One run-time entry as set: which rule, which key or prefix, what it sets, until when.
struct runtime_override {
  std::string rule;
  override_spec spec;  // spec.expires_at: required (> now when set)
};

// The rule an entry names, or nullptr: a rules file's (config::find), or an Envoy rate_limit's
// as a rule (envoy_rule_names.hpp). Called under the table's lock: it must not call back.
using rule_lookup = std::function<const rule*(std::string_view name)>;
rule_lookup lookup_in(const config& cfg);

// Whether an entry built against `a` may decide under `b`: the same policy, shadow, burst as
// written and key source (the file's overrides aside).
bool same_base_rule(const rule& a, const rule& b) noexcept;

// Names of Envoy rate_limits start with this (envoy/envoy_rule_names.hpp has the format). Their
// entries set only the limit: the rule's unit is what Envoy reports it in.
inline constexpr std::string_view envoy_rule_prefix = "envoy:";

// Why `o` cannot be an entry at `now` under the rules `find` gives (no such rule, a concurrency
// rule, a bad key, nothing set, an expiry not after `now`, fields the rule does not take), or
// nullopt. The bounds aside: what `floodgate override list` says of an entry not in force.
std::optional<std::string> override_refusal(const rule_lookup& find, const runtime_override& o,
                                            std::int64_t now);

// The run-time overrides in force at one moment, by rule.
class runtime_snapshot {
 public:
  // The override's rule for `key` under `base` at `now`, or nullptr (then the static overrides
  // and the rule decide). An entry built against another version of the rule (a reload
  // changed it and rebind() has not run yet) is never used.
  const rule* resolve(const rule& base, std::string_view key, std::int64_t now) const {
    const auto* e = find(base, key, now);
    return e ? &e->as_rule : nullptr;
  }
  // The entry itself (its match, kind and expiry: what /v1/inspect reports), or nullptr.
  const override_table::entry* find(const rule& base, std::string_view key, std::int64_t now) const;
  // The same for a rule known by its policy alone (an Envoy rate_limit's): an entry built
  // against another policy is never used.
  const override_table::entry* find(const floodgate::policy& base, std::string_view key,
                                    std::int64_t now) const;
  bool empty() const noexcept { return rules_.empty(); }
  // Appends the policies of the entries that reserve (expired ones too: a superset of those in
  // force is what a reload's keep_reservations_of may be given).
  void reserving_policies(std::vector<floodgate::policy>& out) const {
    for (const auto& [name, r] : rules_) r.table.reserving_policies(out);
  }

 private:
  friend class runtime_overrides;
  struct per_rule {
    rule base;  // the rule the entries were built against (without its overrides)
    override_table table;
  };
  const per_rule* of(const floodgate::policy& base) const;
  std::map<std::string, per_rule, std::less<>> rules_;  // by the base's policy name
};

class runtime_overrides {
 public:
  explicit runtime_overrides(std::size_t max_entries = max_overrides_total)
      : max_entries_(max_entries), current_(std::make_shared<const runtime_snapshot>()) {}

  // Adds or replaces the entry for (rule, kind, match). Refused with the reason: no such rule
  // (or a concurrency rule), an empty or over-long key, nothing set, an expiry not after `now`,
  // fields the rule's algorithm does not take, or the table full.
  std::optional<std::string> set(const rule_lookup& find, runtime_override o, std::int64_t now);
  std::optional<std::string> set(const config& cfg, runtime_override o, std::int64_t now) {
    return set(lookup_in(cfg), std::move(o), now);
  }
  // Every entry replaced by `entries` (each checked as set() checks it; a refused one is left
  // out and described in the result, as are entries beyond the bounds), with one snapshot
  // published: how floodgated applies the list read from Redis without rebuilding the table
  // once per entry.
  std::vector<std::string> replace(const rule_lookup& find, std::vector<runtime_override> entries,
                                   std::int64_t now);
  std::vector<std::string> replace(const config& cfg, std::vector<runtime_override> entries,
                                   std::int64_t now) {
    return replace(lookup_in(cfg), std::move(entries), now);
  }
  // Removes the entry; false if there was none.
  bool remove(std::string_view rule, match_kind kind, std::string_view match);
  // The entries live at `now`, by rule, then exact keys before prefixes, then by key.
  std::vector<runtime_override> list(std::int64_t now) const;
  // After a reload: every live entry rebuilt against `cfg`'s rules. An entry whose rule is gone
  // or no longer takes its fields is dropped, and named in the returned messages.
  std::vector<std::string> rebind(const rule_lookup& find, std::int64_t now);
  std::vector<std::string> rebind(const config& cfg, std::int64_t now) {
    return rebind(lookup_in(cfg), now);
  }

  std::shared_ptr<const runtime_snapshot> current() const noexcept { return current_.load(); }

 private:
  // Rebuilds the snapshot from entries_, each against its rule as `base_of(name)` gives it;
  // entries that fail are removed and described in `dropped`. Holds mutex_.
  void publish(const rule_lookup& base_of, std::vector<std::string>* dropped);
  void drop_expired(std::int64_t now);

  std::size_t max_entries_;
  mutable std::mutex mutex_;
  std::vector<runtime_override> entries_;  // the source of truth; the snapshot is built from it
  std::map<std::string, rule, std::less<>> bases_;  // by entry rule name: what each was built on
  std::atomic<std::shared_ptr<const runtime_snapshot>> current_;
};

}  // namespace floodgate::service
