// A rules file as floodgated loads it at start-up and on SIGHUP (parse_config), for both
// placements. Properties: a bad file is a config_error naming the file and nothing else (no
// crash, no other exception); an accepted one is consistent (names resolve, groups are within
// the caps, cluster placement only accepts what the looser placement accepts too).
#include <exception>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "config/override_table.hpp"
#include "floodgate/errors.hpp"
#include "fuzz_entries.hpp"

namespace floodgate::fuzz {
namespace {

using service::config;
using service::placement;

std::optional<config> load(std::string_view text, placement where) {
  try {
    return service::parse_config(text, "fuzz.yaml", where);
  } catch (const config_error& e) {
    require(std::string_view(e.what()).starts_with("fuzz.yaml"),
            "a config_error that does not name the file");
  } catch (const std::exception& e) {
    require(false,
            std::string("parse_config threw something other than config_error: ") + e.what());
  }
  return std::nullopt;
}

void check_consistent(const config& c, placement where) {
  require(!c.rules().empty(), "an accepted file without rules");
  for (const auto& r : c.rules()) {
    require(c.find(r.name()) == &r, "a rule's name does not find it (duplicate names?)");
    if (!r.overrides) continue;
    // An override is the rule with another policy: same name, algorithm, key source, shadow.
    require(r.overrides->size() <= service::max_overrides_per_rule, "too many overrides");
    for (const auto* e : r.overrides->entries()) {
      const auto& o = e->as_rule;
      require(o.name() == r.name() && o.policy.algo() == r.policy.algo() && o.key.same_as(r.key) &&
                  o.shadow == r.shadow && !o.overrides,
              "an override changed what is the rule's");
      require(&service::config::resolve(r, e->match) != &r, "an override that never decides");
    }
  }
  for (const auto& g : c.groups()) {
    require(c.find_group(g.name) == &g, "a group's name does not find it");
    require(c.find(g.name) == nullptr, "a group and a rule share a name");
    require(!g.rules.empty() && g.rules.size() <= service::max_group_rules,
            "a group outside 1..max_group_rules");
    for (std::size_t i = 0; i < g.rules.size(); ++i) {
      require(g.rules[i] < c.rules().size(), "a group names a rule index out of range");
      for (std::size_t j = 0; j < i; ++j) require(g.rules[i] != g.rules[j], "a rule twice");
      if (where == placement::one_key_per_group)
        require(c.rules()[g.rules[i]].key.same_as(c.rules()[g.rules.front()].key),
                "a cluster group whose rules take different keys");
    }
  }
}

}  // namespace

void rules_yaml(bytes data) {
  const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  const auto any = load(text, placement::any);
  if (any) check_consistent(*any, placement::any);
  const auto cluster = load(text, placement::one_key_per_group);
  if (cluster) {
    check_consistent(*cluster, placement::one_key_per_group);
    require(any.has_value(), "accepted for a cluster but refused otherwise");
  }
}

}  // namespace floodgate::fuzz
