// How `floodgate override set` names an Envoy rate_limit, and those rules as run-time overrides
// see them (config/runtime_overrides.hpp). A rate_limit sits at a path of descriptor entries
// under a domain; its name spells that path out:
//
//   envoy:DOMAIN:KEY=VALUE,KEY=VALUE,...,KEY        (KEY alone: a key-only entry)
//
//   domain: edge
//   descriptors:
//     - key: tenant                  # envoy:edge:tenant         (each tenant's counter)
//       rate_limit: {unit: minute, requests_per_unit: 100}
//       descriptors:
//         - key: path
//           value: /login            # envoy:edge:tenant,path=/login
//           rate_limit: {unit: second, requests_per_unit: 5}
//
// In DOMAIN, each KEY and each VALUE the characters '%', ':', ',' and '=' are written %25, %3A,
// %2C and %3D, so no two paths share a name (a VALUE holding ',' cannot pass for two entries).
// A wildcard VALUE is written as in the file (`path=/api/*`). The key an override gives is the
// value of the request's last entry, as for the file's `overrides:` (docs/envoy.md).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "envoy_config.hpp"

namespace floodgate::service::envoy {

struct envoy_rule_path {
  std::string domain;
  std::vector<descriptor_entry> entries;  // value empty: a key-only entry
};

std::string envoy_rule_name(const envoy_rule_path& p);
// The path a name spells, or nullopt with what is wrong in `why`.
std::optional<envoy_rule_path> parse_envoy_rule_name(std::string_view name, std::string& why);

// Every rate_limit of `cfg` an override can apply to, as a rule by its name: the rate_limit's
// policy (shadow as shadow_mode), no overrides. Left out: unlimited ones and requests_per_unit
// 0 (no counter), and share_threshold ones (every matching value counts on one counter).
std::map<std::string, rule, std::less<>> envoy_override_rules(const envoy_config& cfg);

}  // namespace floodgate::service::envoy
