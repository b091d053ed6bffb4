// floodgated's configuration: the rules it enforces, loaded from a YAML file.
//
//   rules:
//     - name: api
//       algorithm: sliding_log   # or sliding_window, fixed_window, token_bucket, gcra
//       limit: 100
//       window: 60s              # ms, s, m, h
//       burst: 20                # token_bucket and gcra only
//       failure_mode: open       # open | closed | local (default: closed)
//       block_for: 15m           # optional: once refused, refused for this long (penalty)
//     - name: exports
//       algorithm: concurrency   # at most `limit` held at once (POST /v1/acquire, /v1/release)
//       limit: 20
//       lease: 30s               # a lease not released or renewed by then ends by itself
//       key: header:X-Api-Key    # for /v1/auth: header:NAME or remote_addr (default)
//       shadow: true             # decide and count, always answer allowed (default: false)
//     - name: search
//       algorithm: token_bucket
//       limit: 10
//       window: 1s
//       overrides:               # optional: keys with their own limit/window/burst/...
//         - key: vip             # this key exactly (wins over every prefix)
//           limit: 100
//         - prefix: "free:"      # every key starting with "free:" (the longest prefix wins)
//           limit: 2
//           burst: 4
//   groups:                      # optional: rules checked together, all-or-nothing
//     - name: login
//       rules: [login-per-minute, login-per-day]
//   trusted_proxies: [127.0.0.1, "::1", 10.0.0.0/8]   # optional: whose X-Real-IP and
//                                # X-Forwarded-For name the client (default: nobody's)
//
//   auto cfg = floodgate::service::load_config("rules.yaml");  // throws config_error
//   if (const rule* r = cfg.find("api")) ...
//   if (const group* g = cfg.find_group("login")) for (const rule* r : cfg.rules_of(*g)) ...
//
// Rules and groups share one namespace (/v1/auth/{name} takes either). With
// placement::one_key_per_group (a Redis Cluster backend), every rule of a group must take its
// key from the same source: the caller key is the hash tag, so only then do a group's
// counters share a slot and fit in one atomic script. Otherwise the file is rejected at load,
// not at the first request.
//
// A bad file throws config_error naming the file, the line and the problem, e.g.
// "rules.yaml:7: rule 'api': limit must be at least 1 (got 0)". Loading happens at start-up
// and on SIGHUP, never on the request path.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/ip_address.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/semaphore.hpp"

namespace floodgate::service {

class override_table;  // config/override_table.hpp

// Where /v1/auth/{rule} takes a rule's key from.
struct key_source {
  enum class kind {
    remote_addr,  // the TCP peer; behind a trusted proxy, the client it names (route.cpp)
    header,       // the value of the request header `header`
  };
  kind from = kind::remote_addr;
  std::string header;  // kind::header only: the name as written in the file

  std::string describe() const;  // "remote_addr" or "header:X-Api-Key", as in the file
  // Whether both yield the same key for every request (header names are case-insensitive).
  bool same_as(const key_source& other) const noexcept;
};

struct rule {
  // For a concurrency rule this carries only the name (and is never checked): `concurrency`
  // is the limit, and /v1/check, /v1/refund, /v1/auth and groups refuse the rule.
  floodgate::policy policy;
  key_source key;
  std::optional<concurrency_policy> concurrency = std::nullopt;
  // Shadow mode: decided and counted as usual, always answered as allowed, a denial reported
  // as "shadow_denied" (shadow.hpp). Checked alone: never in a group or a "rules" list.
  bool shadow = false;
  // The file gave `burst` (an override that sets no burst keeps it; else the override's limit
  // is its burst, as the rule's limit is the rule's).
  bool burst_given = false;
  // Keys with their own policy (override_table.hpp); null: none. An override's own rule has
  // none.
  std::shared_ptr<const override_table> overrides = nullptr;
  // This is an override's rule (a key's own policy under the rule's name), not the rule's.
  bool is_override = false;

  const std::string& name() const noexcept { return policy.name(); }
};

// Rules decided together with check_all: all admitted and charged, or none.
struct group {
  std::string name;
  std::vector<std::size_t> rules;  // indices into config::rules(), distinct, in file order
};

// What the backend needs of a group.
enum class placement {
  any,                // memory, Redis, Sentinel: one script can hold any keys
  one_key_per_group,  // Redis Cluster: a group's rules must share their key source
};

class config {
 public:
  config() = default;
  // Builds the name index: once per load, so a lookup costs the same for every rule.
  explicit config(std::vector<rule> rules, std::vector<group> groups = {},
                  std::vector<cidr> trusted_proxies = {});

  // By name, in O(1) on average: the request path's first step (the list's last rule of
  // 10,000 served at a quarter of the first's rate while this walked the list).
  const rule* find(std::string_view name) const noexcept;
  const group* find_group(std::string_view name) const noexcept;
  const std::vector<rule>& rules() const noexcept { return rules_; }
  const std::vector<group>& groups() const noexcept { return groups_; }
  std::vector<const rule*> rules_of(const group& g) const;
  // The rule that decides `key` under `r` (a rule of this config): an override's (the exact
  // key, else the longest prefix), or `r` itself. O(key length + log overrides).
  static const rule& resolve(const rule& r, std::string_view key);
  // Appends every policy that reserves: the rules' and their overrides' (what a reload keeps
  // reservations of: limiter::keep_reservations_of).
  void reserving_policies(std::vector<floodgate::policy>& out) const;
  // Peers whose X-Real-IP / X-Forwarded-For are believed; empty: nobody's.
  const std::vector<cidr>& trusted_proxies() const noexcept { return trusted_proxies_; }
  bool is_trusted_proxy(const ip_address& a) const noexcept;

 private:
  // Heterogeneous lookup: a request's string_view finds a name without a copy.
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  using name_index = std::unordered_map<std::string, std::size_t, name_hash, std::equal_to<>>;

  std::vector<rule> rules_;
  std::vector<group> groups_;
  std::vector<cidr> trusted_proxies_;
  name_index rule_index_;   // name -> position in rules_
  name_index group_index_;  // name -> position in groups_
};

// At most this many rules in a group (the service's cap on one check_all).
inline constexpr std::size_t max_group_rules = 16;

// Reads and validates `path`; messages name the file as given.
config load_config(const std::string& path, placement where = placement::any);
// Validates YAML text; `file_name` is only used in messages.
config parse_config(std::string_view text, std::string_view file_name,
                    placement where = placement::any);

}  // namespace floodgate::service
