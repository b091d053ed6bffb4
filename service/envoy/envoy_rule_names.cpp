#include "envoy_rule_names.hpp"

#include "config/percent_decode.hpp"
#include "config/runtime_overrides.hpp"

namespace floodgate::service::envoy {
namespace {

// ':' ends the domain, ',' an entry, '=' a key.
void put_escaped(std::string& out, std::string_view s) {
  percent_escape(out, s, ":,=");
}

std::optional<std::string> unescaped(std::string_view s) {
  return percent_decode(s, plus_sign::literal);
}

void walk(const std::string& domain, const std::vector<descriptor_node>& level,
          std::vector<descriptor_entry>& path, std::map<std::string, rule, std::less<>>& out) {
  for (const auto& node : level) {
    path.push_back({node.key, node.value});
    if (node.limit && node.limit->policy && !node.share_threshold) {
      rule r{.policy = *node.limit->policy, .key = {}};
      r.shadow = node.limit->shadow_mode;
      out.emplace(envoy_rule_name({domain, path}), std::move(r));
    }
    walk(domain, node.children, path, out);
    path.pop_back();
  }
}

}  // namespace

std::string envoy_rule_name(const envoy_rule_path& p) {
  std::string out(envoy_rule_prefix);
  put_escaped(out, p.domain);
  out += ':';
  for (std::size_t i = 0; i < p.entries.size(); ++i) {
    if (i > 0) out += ',';
    put_escaped(out, p.entries[i].key);
    if (!p.entries[i].value.empty()) {
      out += '=';
      put_escaped(out, p.entries[i].value);
    }
  }
  return out;
}

std::optional<envoy_rule_path> parse_envoy_rule_name(std::string_view name, std::string& why) {
  const auto bad = [&](std::string what) {
    why = "'" + std::string(name.substr(0, 200)) + "' is not an Envoy rule name (" +
          std::move(what) + "; envoy:DOMAIN:KEY=VALUE,...,KEY)";
    return std::nullopt;
  };
  if (!name.starts_with(envoy_rule_prefix)) return bad("no envoy: in front");
  name.remove_prefix(envoy_rule_prefix.size());
  const auto colon = name.find(':');
  if (colon == std::string_view::npos) return bad("no ':' after the domain");
  envoy_rule_path p;
  const auto domain = unescaped(name.substr(0, colon));
  if (!domain || domain->empty()) return bad("an empty or badly escaped domain");
  p.domain = *domain;
  std::string_view rest = name.substr(colon + 1);
  if (rest.empty()) return bad("no descriptor entries");
  for (;;) {
    const auto comma = rest.find(',');
    const auto entry = rest.substr(0, comma);
    const auto eq = entry.find('=');
    const auto key = unescaped(entry.substr(0, eq));
    const auto value = eq == std::string_view::npos ? std::optional<std::string>("")
                                                    : unescaped(entry.substr(eq + 1));
    if (!key || !value || key->empty() || (eq != std::string_view::npos && value->empty()))
      return bad("an empty or badly escaped entry");
    p.entries.push_back({*key, *value});
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return p;
}

std::map<std::string, rule, std::less<>> envoy_override_rules(const envoy_config& cfg) {
  std::map<std::string, rule, std::less<>> out;
  std::vector<descriptor_entry> path;
  for (const auto& [name, domain] : cfg.domains()) walk(name, domain.descriptors, path, out);
  return out;
}

}  // namespace floodgate::service::envoy
