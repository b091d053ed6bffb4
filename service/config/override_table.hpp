// Per-key overrides of a rule: specific keys (exact, or every key starting with a prefix) get
// their own limit, window, burst, penalty or failure mode. docs/configuration.md has the
// schema, docs/operations.md ("Per-key overrides") how to use them.
//
//   override_table t = build_override_table(base_rule, {{"vip", match_kind::exact, {.limit=1000}},
//                                                       {"free:", match_kind::prefix,
//                                                       {.limit=10}}});
//   const rule& r = t.resolve(base_rule, "free:42");   // the "free:" override's rule
//
// Precedence: an exact key before any prefix, then the longest prefix. An override is a rule of
// its own (the base rule with another policy) under the rule's name: its state key carries the
// policy's units as a reloaded rule's does, so a key moving between the rule and an override,
// or between two overrides, is treated exactly as a reload that changed the rule
// (docs/algorithms.md, "State and policy changes"): never read in another policy's units.
//
// Lookup costs O(key length) for the exact keys (a hash) and O(log n × key length) for the
// prefixes (a sorted table; each prefix knows the longest other prefix of it, so the longest
// prefix of a key is found from the one binary search). Bounded: max_overrides_per_rule,
// max_overrides_total, max_override_key_size.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::service {

// Bounds: a hostile or mistaken config (or run-time table) must not make lookups or memory
// unbounded. Each override holds a policy (~100 bytes) and its key.
inline constexpr std::size_t max_overrides_per_rule = 10'000;
inline constexpr std::size_t max_overrides_total = 100'000;
inline constexpr std::size_t max_override_key_size = 1024;  // = request_limits::max_key_size

enum class match_kind { exact, prefix };

// What an override may set; nullopt keeps the rule's value as written in the file (a burst the
// rule left to its default is the override's limit, as it would be in the rule).
struct policy_fields {
  std::optional<std::int64_t> limit = std::nullopt;
  std::optional<std::chrono::milliseconds> window = std::nullopt;
  std::optional<std::int64_t> burst = std::nullopt;
  std::optional<std::chrono::milliseconds> block_for = std::nullopt;
  std::optional<failure_mode> on_failure = std::nullopt;

  bool empty() const noexcept { return !limit && !window && !burst && !block_for && !on_failure; }
};

// `base` with `f` applied (the rule's reservation kept). Throws config_error with the policy's
// message ("policy 'api': burst applies only to ...") when the result is not a valid policy.
floodgate::policy apply_fields(const rule& base, const policy_fields& f);

struct override_spec {
  std::string match;  // the key, or the prefix
  match_kind kind = match_kind::exact;
  policy_fields fields;
  std::int64_t expires_at = 0;  // run-time entries: ms since the Unix epoch; 0: never
  std::uint32_t tag = 0;        // the caller's, kept with the entry (the Envoy config's unit)
};

// One rule's overrides, immutable once built. A resolved rule lives as long as the table.
class override_table {
 public:
  struct entry {
    std::string match;
    match_kind kind;
    rule as_rule;                 // the base rule with the override's policy (and no overrides)
    policy_fields fields;         // as given
    std::int64_t expires_at = 0;  // ms since the Unix epoch; 0: never
    std::uint32_t tag = 0;        // override_spec::tag
    std::size_t parent = npos;    // prefixes: the longest other prefix of this one, or npos
  };
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  override_table() = default;

  // The entry for `key`: exact first, then the longest prefix; nullptr when none matches. An
  // entry that expired by `now` (ms since the Unix epoch) is passed over for the next one.
  const entry* find(std::string_view key, std::int64_t now = 0) const;
  // The rule that decides `key`: an override's, or `base`.
  const rule& resolve(const rule& base, std::string_view key) const;

  bool empty() const noexcept { return exact_.empty() && prefixes_.empty(); }
  std::size_t size() const noexcept { return exact_.size() + prefixes_.size(); }
  // Exact keys in no order, then prefixes sorted.
  std::vector<const entry*> entries() const;
  // Appends the policies of the entries that reserve (what a reload keeps reservations of).
  void reserving_policies(std::vector<floodgate::policy>& out) const;

  // Sorts and indexes; the specs must hold no two of the same (kind, match) (the caller says
  // where they were written). Throws config_error from apply_fields.
  friend override_table build_override_table(const rule& base, std::vector<override_spec> specs);

 private:
  struct hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, entry, hash, std::equal_to<>> exact_;
  std::vector<entry> prefixes_;  // sorted by match
};

override_table build_override_table(const rule& base, std::vector<override_spec> specs);

}  // namespace floodgate::service
