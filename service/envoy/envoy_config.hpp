// envoyproxy/ratelimit's configuration files, as they are: one domain per file, nested
// descriptors, a rate_limit where a request's descriptor ends.
//
//   domain: edge
//   descriptors:
//     - key: remote_address            # key only: each distinct value has its own counter
//       rate_limit: {unit: minute, requests_per_unit: 60}
//     - key: path
//       value: /login                  # key and value: this value only (wins over key-only)
//       rate_limit: {unit: second, requests_per_unit: 5, name: login, algorithm: gcra}
//       descriptors:
//         - key: user
//           rate_limit: {unlimited: true}
//     - key: path
//       value: /api/*/upload           # '*' anywhere: any run of characters (a glob)
//       rate_limit: {unit: second, requests_per_unit: 0}   # 0: every request over the limit
//
//   auto cfg = load_envoy_config({"ratelimit/config"});  // files or directories; throws
//   rule_match m = cfg->match("edge", entries);          // m.limit nullptr: no limit applies
//
// Fields follow upstream (domain, descriptors, key, value, rate_limit, unit,
// requests_per_unit, unit_multiplier, unlimited, name, replaces, shadow_mode, detailed_metric,
// value_to_metric, share_threshold, metadata, quota_mode); three are ours, per rate_limit:
// `algorithm` (default fixed_window, aligned to the epoch as upstream counts), `failure_mode`
// (default closed) and `overrides` (values with their own limit: docs/envoy.md). `metadata` is
// accepted and never sent (floodgate sets no dynamic_metadata); `quota_mode: true` is refused (its
// answer lives in dynamic_metadata). Unknown fields, duplicate domains or descriptors, bad units
// and contradictions throw config_error naming the file, line and problem. Loading happens at
// start-up and on SIGHUP only.
//
// Matching cost: each level is indexed by key, then by exact value (O(log n)); the wildcards of
// that key are tried in file order, each in time linear in the value and the pattern.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/policy.hpp"

namespace floodgate::service {
class override_table;  // config/override_table.hpp
}

namespace floodgate::service::envoy {

// Envoy's RateLimitResponse.RateLimit.Unit (and type.v3.RateLimitUnit), same numbers.
enum class unit : int {
  unknown = 0,
  second = 1,
  minute = 2,
  hour = 3,
  day = 4,
  month = 5,
  year = 6,
  week = 7
};

// The window of a unit as upstream counts it: a month is 30 days, a year 365.
std::optional<std::chrono::milliseconds> window_of(unit u) noexcept;
std::optional<unit> parse_unit(std::string_view text) noexcept;  // case-insensitive
std::string_view to_string(unit u) noexcept;                     // "second", ...

struct rate_limit {
  std::string name;          // upstream's optional `name` (used by `replaces`); may be empty
  unit per = unit::unknown;  // unknown when unlimited
  // 0 (upstream's block-list idiom): every request is over the limit, decided without a counter.
  std::uint32_t requests_per_unit = 0;
  std::uint32_t unit_multiplier = 1;  // upstream's: the window is this many units
  // The counting window: unit × unit_multiplier (a month is 30 days, a year 365).
  std::chrono::milliseconds window() const noexcept {
    return window_of(per).value_or(std::chrono::milliseconds{0}) * unit_multiplier;
  }
  bool unlimited = false;    // always OK, limit_remaining 4294967295, no counter
  bool shadow_mode = false;  // reported, never refuses
  bool detailed_metric = false;       // metrics named by the request's full descriptor (bounded)
  std::vector<std::string> replaces;  // names of limits this one replaces in a request
  // The counter's policy (not for unlimited, nor for requests_per_unit 0): its name identifies
  // the rule (domain and path), so it is stable across reloads of the same file.
  std::optional<floodgate::policy> policy;
  std::string metric_name;  // upstream's stats key below the domain, e.g. "path_/login.user"
  // Ours: values of the request's last entry (the one this limit sits on) with their own
  // requests_per_unit, unit or unit_multiplier: the exact value, else the longest prefix
  // (override_table.hpp; an entry's tag is its unit). Null: none.
  std::shared_ptr<const override_table> overrides;
};

// One level of a domain's tree, by key: positions in the level's vector of the exact values,
// the wildcards (in file order: the first that matches wins, as upstream) and the key-only rule.
struct level_index {
  struct by_key {
    std::map<std::string, std::uint32_t, std::less<>> values;  // wildcards too, literally
    std::vector<std::uint32_t> wildcards;
    std::optional<std::uint32_t> key_only;
  };
  std::map<std::string, by_key, std::less<>> keys;
};

struct descriptor_node {
  std::string key;
  std::string value;             // empty: key only; with '*': a glob (upstream's wildcards)
  bool wildcard = false;         // value holds a '*'
  bool value_to_metric = false;  // metrics name the request's value here, not the rule's
  bool share_threshold = false;  // (wildcards) every matching value shares one counter
  std::optional<rate_limit> limit;
  std::vector<descriptor_node> children;
  std::shared_ptr<const level_index> children_index;
};

struct domain_config {
  std::string name;
  std::string file;  // where it came from, for logs
  std::vector<descriptor_node> descriptors;
  std::shared_ptr<const level_index> index;
};

struct descriptor_entry {
  std::string key;
  std::string value;
};

// `*` in `pattern` matches any run of characters (also none); everything else itself. Linear
// in |pattern| + |value| (the literal runs are found leftmost, in order), whatever the value.
bool glob_match(std::string_view pattern, std::string_view value) noexcept;

// What a request's descriptor matched.
struct rule_match {
  const rate_limit* limit = nullptr;  // nullptr: no limit applies
  // The metric's rule name when it depends on the request (detailed_metric, value_to_metric,
  // share_threshold; upstream's stats key below the domain); empty: limit->metric_name.
  std::string metric_name;
  // share_threshold: the entries the counter is keyed by (a shared pattern in place of the
  // values it matched); empty: the request's entries.
  std::vector<descriptor_entry> counter_entries;
};

class envoy_config {
 public:
  envoy_config() = default;
  explicit envoy_config(std::map<std::string, domain_config, std::less<>> domains)
      : domains_(std::move(domains)) {}

  // The rule for a request's descriptor: at each level the exact value, then the first
  // wildcard that matches, then the key alone; a limit only where the request's last entry
  // lands (upstream's rule). No limit: an unknown domain or no match.
  rule_match match(std::string_view domain, const std::vector<descriptor_entry>& entries) const;
  const rate_limit* find(std::string_view domain,
                         const std::vector<descriptor_entry>& entries) const {
    return match(domain, entries).limit;
  }
  bool has_domain(std::string_view domain) const noexcept { return domains_.contains(domain); }
  const std::map<std::string, domain_config, std::less<>>& domains() const noexcept {
    return domains_;
  }
  std::size_t rule_count() const noexcept;

 private:
  std::map<std::string, domain_config, std::less<>> domains_;
};

// Each path is a YAML file, or a directory whose *.yaml files (not recursively) are each one
// domain. Throws config_error "FILE:LINE: problem".
std::shared_ptr<const envoy_config> load_envoy_config(const std::vector<std::string>& paths);
// One file's text; `file_name` only appears in messages. Adds its domain to `into`.
void parse_envoy_domain(std::string_view text, std::string_view file_name,
                        std::map<std::string, domain_config, std::less<>>& into);

}  // namespace floodgate::service::envoy
