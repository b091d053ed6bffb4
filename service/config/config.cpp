#include "config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>

#include "config/config_file.hpp"
#include "config/override_table.hpp"
#include "config/yaml_problem.hpp"
#include "floodgate/duration.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service {
namespace {

constexpr std::string_view known_fields[] = {
    "name",  "algorithm",    "limit",  "window",  "burst",       "key",      "block_for",
    "lease", "failure_mode", "shadow", "reserve", "reserve_for", "overrides"};

// What an override may set (override_table.hpp's policy_fields), besides its key or prefix.
constexpr std::string_view override_fields[] = {"limit", "window", "burst", "block_for",
                                                "failure_mode"};

// RFC 9110 token characters: what a header name may hold.
bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// Group names follow policy names' rules: they appear in URLs (/v1/auth/{name}) and logs.
bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > policy::max_name_length) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  return true;
}

class parser {
 public:
  parser(std::string_view file, placement where) : file_(file), where_(where) {}

  config parse(std::string_view text) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::ParserException& e) {
      fail(e.mark.line + 1, yaml_problem(e));
    }
    if (!root.IsDefined() || root.IsNull()) fail(1, "the file is empty; expected 'rules:'");
    if (!root.IsMap()) fail(line(root), "expected a map with 'rules:' at the top level");

    // std::optional: assigning to a YAML::Node would overwrite the node it refers to.
    std::optional<YAML::Node> rules_found;
    std::optional<YAML::Node> groups_found;
    std::optional<YAML::Node> proxies_found;
    for (const auto& kv : root) {
      const auto key = kv.first.Scalar();
      auto& slot = key == "rules" ? rules_found : key == "groups" ? groups_found : proxies_found;
      if (key != "rules" && key != "groups" && key != "trusted_proxies")
        fail(line(kv.first),
             "unknown top-level field '" + key + "' (expected rules, groups, trusted_proxies)");
      if (slot) fail(line(kv.first), "duplicate field '" + key + "'");
      slot.emplace(kv.second);
    }
    if (!rules_found) fail(line(root), "missing 'rules:'");
    const YAML::Node& rules_node = *rules_found;
    if (!rules_node.IsSequence()) fail(line(rules_node), "'rules' must be a list of rules");
    if (rules_node.size() == 0) fail(line(rules_node), "'rules' must hold at least one rule");

    std::vector<rule> rules;
    std::size_t index = 0;
    for (const auto& node : rules_node) {
      ++index;
      rule r = parse_rule(node, index);
      claim_name(r.name(), "rule '" + r.name() + "'", line(node));
      rule_at_.emplace(r.name(), rules.size());
      rules.push_back(std::move(r));
    }

    std::vector<group> groups;
    if (groups_found) {
      const YAML::Node& groups_node = *groups_found;
      if (!groups_node.IsSequence()) fail(line(groups_node), "'groups' must be a list of groups");
      index = 0;
      for (const auto& node : groups_node) groups.push_back(parse_group(node, ++index, rules));
    }
    std::vector<cidr> proxies;
    if (proxies_found) proxies = parse_trusted_proxies(*proxies_found);
    return config(std::move(rules), std::move(groups), std::move(proxies));
  }

 private:
  [[noreturn]] void fail(int at, const std::string& what) const {
    throw config_error(file_ + ":" + std::to_string(at) + ": " + what);
  }

  static int line(const YAML::Node& n) { return n.Mark().line + 1; }

  // A rule's fields by name, each with the line of its key (for messages about it).
  using field_map = std::map<std::string, std::pair<YAML::Node, int>, std::less<>>;

  // The field `what` (the rule at `node`) must have; a message on the rule's line if missing.
  const std::pair<YAML::Node, int>& required(const field_map& fields, std::string_view field,
                                             const YAML::Node& node,
                                             const std::string& what) const {
    const auto it = fields.find(field);
    if (it == fields.end()) fail(line(node), what + ": missing field '" + std::string(field) + "'");
    return it->second;
  }

  // A policy refused the rule: its message, which reads "<prefix>FIELD ...", blamed on that
  // field's line (the rule's when it names no field of it).
  [[noreturn]] void fail_policy(const config_error& e, std::string_view prefix,
                                const field_map& fields, const YAML::Node& node,
                                const std::string& what) const {
    std::string_view msg = e.what();
    if (msg.starts_with(prefix)) msg.remove_prefix(prefix.size());
    const auto field = msg.substr(0, msg.find_first_of(" ("));
    const auto it = fields.find(field);
    fail(it != fields.end() ? it->second.second : line(node), what + ": " + std::string(msg));
  }

  rule parse_rule(const YAML::Node& node, std::size_t index) {
    if (!node.IsMap()) fail(line(node), "rule #" + std::to_string(index) + " must be a map");

    field_map fields;
    for (const auto& kv : node) {
      const auto key = kv.first.Scalar();
      const int at = line(kv.first);
      if (fields.count(key)) fail(at, what_of(index, fields) + ": duplicate field '" + key + "'");
      fields.emplace(key, std::pair{kv.second, at});
    }

    // The name first, so every later message can say which rule it is about.
    std::string what = "rule #" + std::to_string(index);
    const auto name_it = fields.find("name");
    if (name_it == fields.end()) fail(line(node), what + ": missing field 'name'");
    const std::string name = string_field(what, "name", name_it->second);
    what = "rule '" + name + "'";

    for (const auto& [key, value] : fields) {
      bool known = false;
      for (auto f : known_fields) known = known || f == key;
      if (!known) fail(value.second, what + ": unknown field '" + key + "'");
    }

    const auto& algo_field = required(fields, "algorithm", node, what);
    const auto algo_text = string_field(what, "algorithm", algo_field);
    if (algo_text == "concurrency") return parse_concurrency(node, name, what, fields);
    const auto algo = parse_algorithm(algo_text);
    if (!algo)
      fail(algo_field.second, what +
                                  ": algorithm must be one of sliding_log, sliding_window, "
                                  "fixed_window, token_bucket, gcra, concurrency (got '" +
                                  algo_text + "')");
    if (auto it = fields.find("lease"); it != fields.end())
      fail(it->second.second, what + ": lease applies only to algorithm: concurrency");

    const auto limit = int_field(what, "limit", required(fields, "limit", node, what));

    const auto window = duration_field(what, "window", required(fields, "window", node, what),
                                       "500ms, 60s, 5m or 1h");

    std::optional<std::int64_t> burst;
    if (auto it = fields.find("burst"); it != fields.end())
      burst = int_field(what, "burst", it->second);

    auto on_failure = failure_mode::closed;
    if (auto it = fields.find("failure_mode"); it != fields.end()) {
      const auto text = string_field(what, "failure_mode", it->second);
      const auto mode = parse_failure_mode(text);
      if (!mode)
        fail(it->second.second,
             what + ": failure_mode must be open, closed or local (got '" + text + "')");
      on_failure = *mode;
    }

    std::chrono::milliseconds block_for{0};
    if (auto it = fields.find("block_for"); it != fields.end())
      block_for = duration_field(what, "block_for", it->second, "30s, 15m or 1h");

    // Reservations (docs/algorithms.md): reserve_for defaults to 1 s, or the window if shorter.
    std::int64_t reserve = 0;
    std::chrono::milliseconds reserve_for =
        std::min<std::chrono::milliseconds>(window, std::chrono::seconds{1});
    if (auto it = fields.find("reserve"); it != fields.end())
      reserve = int_field(what, "reserve", it->second);
    if (auto it = fields.find("reserve_for"); it != fields.end()) {
      if (reserve == 0) fail(it->second.second, what + ": reserve_for applies only with reserve");
      reserve_for = duration_field(what, "reserve_for", it->second, "500ms or 1s");
    }

    key_source key;
    if (auto it = fields.find("key"); it != fields.end()) {
      const auto text = string_field(what, "key", it->second);
      constexpr std::string_view prefix = "header:";
      if (text == "remote_addr") {
        key.from = key_source::kind::remote_addr;
      } else if (text.starts_with(prefix) && text.size() > prefix.size()) {
        key.from = key_source::kind::header;
        key.header = text.substr(prefix.size());
        for (char c : key.header)
          if (!is_tchar(c))
            fail(it->second.second, what + ": '" + key.header + "' is not a valid header name");
      } else {
        fail(it->second.second,
             what + ": key must be remote_addr or header:NAME (got '" + text + "')");
      }
    }

    bool shadow = false;
    if (auto it = fields.find("shadow"); it != fields.end()) {
      const auto& n = it->second.first;
      const std::string text = n.IsScalar() ? n.Scalar() : std::string();
      if (!n.IsScalar() || n.Tag() == "!" || (text != "true" && text != "false"))
        fail(it->second.second, what + ": shadow must be true or false (got '" + text + "')");
      shadow = text == "true";
    }

    rule r = [&] {
      try {
        return rule{policy(name, *algo, limit, window, burst, on_failure)
                        .with_block_for(block_for)
                        .with_reserve(reserve, reserve_for),
                    std::move(key), std::nullopt, shadow, burst.has_value()};
      } catch (const config_error& e) {
        fail_policy(e, "policy '" + name + "': ", fields, node, what);
      }
    }();
    if (auto it = fields.find("overrides"); it != fields.end())
      r.overrides = std::make_shared<const override_table>(parse_overrides(r, it->second, what));
    return r;
  }

  // A rule's `overrides:` list: each entry a key or a prefix and what it sets.
  override_table parse_overrides(const rule& base, const std::pair<YAML::Node, int>& field,
                                 const std::string& what) {
    const YAML::Node& list = field.first;
    if (!list.IsSequence())
      fail(field.second, what + ": overrides must be a list of {key or prefix, limit, ...}");
    if (list.size() > max_overrides_per_rule)
      fail(field.second, what + ": at most " + std::to_string(max_overrides_per_rule) +
                             " overrides per rule (got " + std::to_string(list.size()) + ")");
    overrides_total_ += list.size();
    if (overrides_total_ > max_overrides_total)
      fail(field.second,
           what + ": more than " + std::to_string(max_overrides_total) + " overrides in the file");
    std::vector<override_spec> specs;
    specs.reserve(list.size());
    // (kind, match) -> line: a key or prefix given twice is a mistake, whichever would win.
    std::map<std::pair<match_kind, std::string>, int> seen;
    std::size_t index = 0;
    for (const auto& node : list) {
      ++index;
      std::string owhat = what + ": override #" + std::to_string(index);
      if (!node.IsMap()) fail(line(node), owhat + " must be a map");
      field_map fields;
      for (const auto& kv : node) {
        const auto key = kv.first.Scalar();
        const int at = line(kv.first);
        if (fields.count(key)) fail(at, owhat + ": duplicate field '" + key + "'");
        fields.emplace(key, std::pair{kv.second, at});
      }
      const auto key_it = fields.find("key");
      const auto prefix_it = fields.find("prefix");
      if (key_it != fields.end() && prefix_it != fields.end())
        fail(prefix_it->second.second, owhat + ": give key or prefix, not both");
      if (key_it == fields.end() && prefix_it == fields.end())
        fail(line(node), owhat +
                             ": missing field 'key' (one key) or 'prefix' (every key "
                             "starting with it)");
      override_spec spec;
      spec.kind = key_it != fields.end() ? match_kind::exact : match_kind::prefix;
      const auto& match_field = spec.kind == match_kind::exact ? key_it->second : prefix_it->second;
      const char* match_name = spec.kind == match_kind::exact ? "key" : "prefix";
      spec.match = string_field(owhat, match_name, match_field);
      if (spec.match.empty() || spec.match.size() > max_override_key_size)
        fail(match_field.second, owhat + ": " + match_name + " must be 1 to " +
                                     std::to_string(max_override_key_size) + " bytes");
      owhat = what + ": override of " + match_name + " '" + spec.match + "'";
      const auto [first, fresh] =
          seen.emplace(std::pair{spec.kind, spec.match}, match_field.second);
      if (!fresh)
        fail(match_field.second, owhat + ": duplicate " + match_name + " (first at line " +
                                     std::to_string(first->second) + ")");

      for (const auto& [name, value] : fields) {
        if (name == "key" || name == "prefix") continue;
        bool settable = false;
        for (auto f : override_fields) settable = settable || f == name;
        if (settable) continue;
        bool rule_field = false;
        for (auto f : known_fields) rule_field = rule_field || f == name;
        fail(value.second,
             owhat + ": " +
                 (rule_field ? name + " cannot be set in an override (it is the rule's; an "
                                      "override sets limit, window, burst, block_for, "
                                      "failure_mode)"
                             : "unknown field '" + name +
                                   "' (expected key or prefix, limit, window, burst, "
                                   "block_for, failure_mode)"));
      }
      auto& f = spec.fields;
      if (auto it = fields.find("limit"); it != fields.end())
        f.limit = int_field(owhat, "limit", it->second);
      if (auto it = fields.find("window"); it != fields.end())
        f.window = duration_field(owhat, "window", it->second, "500ms, 60s, 5m or 1h");
      if (auto it = fields.find("burst"); it != fields.end())
        f.burst = int_field(owhat, "burst", it->second);
      if (auto it = fields.find("block_for"); it != fields.end())
        f.block_for = duration_field(owhat, "block_for", it->second, "30s, 15m or 1h");
      if (auto it = fields.find("failure_mode"); it != fields.end()) {
        const auto text = string_field(owhat, "failure_mode", it->second);
        f.on_failure = parse_failure_mode(text);
        if (!f.on_failure)
          fail(it->second.second,
               owhat + ": failure_mode must be open, closed or local (got '" + text + "')");
      }
      if (f.empty())
        fail(line(node), owhat +
                             ": sets nothing (give limit, window, burst, block_for or "
                             "failure_mode)");
      try {
        (void)apply_fields(base, f);
      } catch (const config_error& e) {
        fail_policy(e, "policy '" + base.name() + "': ", fields, node, owhat);
      }
      specs.push_back(std::move(spec));
    }
    return build_override_table(base, std::move(specs));
  }

  // algorithm: concurrency: name, limit, lease, optional failure_mode (open or closed).
  rule parse_concurrency(const YAML::Node& node, const std::string& name, const std::string& what,
                         const field_map& fields) {
    for (const char* other :
         {"window", "burst", "block_for", "key", "shadow", "reserve", "reserve_for", "overrides"})
      if (auto it = fields.find(other); it != fields.end())
        fail(it->second.second, what + ": " + other +
                                    " does not apply to algorithm: concurrency (it takes limit "
                                    "and lease)");
    const auto limit = int_field(what, "limit", required(fields, "limit", node, what));
    const auto lease =
        duration_field(what, "lease", required(fields, "lease", node, what), "30s or 5m");
    auto on_failure = failure_mode::closed;
    if (auto it = fields.find("failure_mode"); it != fields.end()) {
      const auto text = string_field(what, "failure_mode", it->second);
      if (text != "open" && text != "closed")
        fail(it->second.second,
             what + ": failure_mode of a concurrency rule must be open or closed (got '" + text +
                 "')");
      on_failure = *parse_failure_mode(text);
    }
    try {
      concurrency_policy c(name, limit, lease, on_failure);
      // The policy carries the name only; its numbers are never used (config.hpp).
      return rule{policy(name, algorithm::fixed_window, 1, std::chrono::milliseconds{1}), {}, c};
    } catch (const config_error& e) {
      fail_policy(e, "concurrency policy '" + name + "': ", fields, node, what);
    }
  }

  // Rules and groups share one namespace: /v1/auth/{name} takes either.
  void claim_name(const std::string& name, const std::string& what, int at) {
    const auto [it, fresh] = first_line_.emplace(name, at);
    if (!fresh)
      fail(at,
           what + ": duplicate name (first defined at line " + std::to_string(it->second) + ")");
  }

  group parse_group(const YAML::Node& node, std::size_t index, const std::vector<rule>& rules) {
    std::string what = "group #" + std::to_string(index);
    if (!node.IsMap()) fail(line(node), what + " must be a map");
    std::optional<std::pair<YAML::Node, int>> name_field;
    std::optional<std::pair<YAML::Node, int>> rules_field;
    std::optional<std::pair<std::string, int>> unknown;  // reported once the name is known
    for (const auto& kv : node) {
      const auto key = kv.first.Scalar();
      if (key != "name" && key != "rules") {
        if (!unknown) unknown.emplace(key, line(kv.first));
        continue;
      }
      auto& slot = key == "name" ? name_field : rules_field;
      if (slot) fail(line(kv.first), what + ": duplicate field '" + key + "'");
      slot.emplace(kv.second, line(kv.first));
    }
    if (!name_field) fail(line(node), what + ": missing field 'name'");
    group g;
    g.name = string_field(what, "name", *name_field);
    what = "group '" + g.name + "'";
    if (unknown)
      fail(unknown->second,
           what + ": unknown field '" + unknown->first + "' (expected name, rules)");
    if (!valid_name(g.name))
      fail(name_field->second, what + ": name must be 1 to " +
                                   std::to_string(policy::max_name_length) +
                                   " letters, digits, '_', '-' or '.'");
    claim_name(g.name, what, name_field->second);

    if (!rules_field) fail(line(node), what + ": missing field 'rules'");
    const YAML::Node& list = rules_field->first;
    if (!list.IsSequence() || list.size() == 0)
      fail(rules_field->second, what + ": rules must be a non-empty list of rule names");
    if (list.size() > max_group_rules)
      fail(rules_field->second, what + ": at most " + std::to_string(max_group_rules) +
                                    " rules (got " + std::to_string(list.size()) + ")");
    const rule* first = nullptr;
    for (const auto& entry : list) {
      const int at = line(entry);
      const auto name = string_field(what, "each of its rules", {entry, at});
      const auto found = rule_at_.find(name);
      if (found == rule_at_.end()) fail(at, what + ": no rule named '" + name + "'");
      const std::size_t i = found->second;
      for (auto seen : g.rules)
        if (seen == i) fail(at, what + ": rule '" + name + "' is listed twice");
      const rule& r = rules[i];
      // A check_all is all-or-nothing: a shadow rule's denial would refuse (and un-charge) the
      // enforced rules beside it.
      if (r.shadow)
        fail(at, what + ": rule '" + name +
                     "' is a shadow rule, which is checked alone (a group's denial by it would "
                     "be enforced)");
      if (r.concurrency)
        fail(at, what + ": rule '" + name + "' is a concurrency limit: it cannot be in a group");
      if (!first) first = &r;
      if (where_ == placement::one_key_per_group && !r.key.same_as(first->key))
        fail(at, what + ": rules '" + first->name() + "' (key " + first->key.describe() +
                     ") and '" + r.name() + "' (key " + r.key.describe() +
                     ") take different keys, so on Redis Cluster their counters live in "
                     "different hash slots and cannot be decided in one atomic script; give "
                     "every rule of the group the same key");
      g.rules.push_back(i);
    }
    return g;
  }

  std::vector<cidr> parse_trusted_proxies(const YAML::Node& list) const {
    if (!list.IsSequence())
      fail(line(list), "'trusted_proxies' must be a list of addresses or CIDR ranges");
    std::vector<cidr> out;
    for (const auto& entry : list) {
      const int at = line(entry);
      if (!entry.IsScalar())
        fail(at, "trusted_proxies: each entry must be an address or a CIDR range");
      const auto& text = entry.Scalar();
      const auto range = parse_cidr(text);
      if (!range)
        fail(at, "trusted_proxies: '" + text +
                     "' is not an IPv4 or IPv6 address or CIDR range (e.g. 127.0.0.1, ::1, "
                     "10.0.0.0/8, fd00::/8; no bits set past the prefix)");
      out.push_back(*range);
    }
    return out;
  }

  std::string string_field(const std::string& what, std::string_view field,
                           const std::pair<YAML::Node, int>& value) const {
    if (!value.first.IsScalar())
      fail(value.second, what + ": " + std::string(field) + " must be a string");
    return value.first.Scalar();
  }

  // A duration (duration.hpp); else "FIELD must be a duration such as EXAMPLES (got '...')".
  std::chrono::milliseconds duration_field(const std::string& what, std::string_view field,
                                           const std::pair<YAML::Node, int>& value,
                                           std::string_view examples) const {
    const auto text = string_field(what, field, value);
    const auto d = parse_duration(text);
    if (!d)
      fail(value.second, what + ": " + std::string(field) + " must be a duration such as " +
                             std::string(examples) + " (got '" + text + "')");
    return *d;
  }

  std::int64_t int_field(const std::string& what, std::string_view field,
                         const std::pair<YAML::Node, int>& value) const {
    const auto& n = value.first;
    const std::string& text = n.IsScalar() ? n.Scalar() : std::string();
    std::int64_t v = 0;
    const char* last = text.data() + text.size();
    // A quoted scalar ("100") has tag "!": it is a string, not an integer.
    if (n.IsScalar() && n.Tag() != "!" && !text.empty()) {
      auto [end, ec] = std::from_chars(text.data(), last, v);
      if (ec == std::errc{} && end == last) return v;
    }
    fail(value.second, what + ": " + std::string(field) + " must be an integer" +
                           (n.IsScalar() ? " (got '" + text + "')" : ""));
  }

  // "rule 'api'" once the name is known, else "rule #3".
  template <class Fields>
  static std::string what_of(std::size_t index, const Fields& fields) {
    const auto it = fields.find("name");
    if (it != fields.end() && it->second.first.IsScalar())
      return "rule '" + it->second.first.Scalar() + "'";
    return "rule #" + std::to_string(index);
  }

  std::string file_;
  placement where_;
  std::size_t overrides_total_ = 0;
  std::map<std::string, int, std::less<>> first_line_;  // rule and group names
  // Rule name -> position: a group's entries are found without a walk of the list.
  std::map<std::string, std::size_t, std::less<>> rule_at_;
};

}  // namespace

std::string key_source::describe() const {
  return from == kind::header ? "header:" + header : "remote_addr";
}

bool key_source::same_as(const key_source& other) const noexcept {
  if (from != other.from) return false;
  if (from != kind::header) return true;
  return header.size() == other.header.size() &&
         std::equal(header.begin(), header.end(), other.header.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         });
}

config::config(std::vector<rule> rules, std::vector<group> groups,
               std::vector<cidr> trusted_proxies)
    : rules_(std::move(rules)),
      groups_(std::move(groups)),
      trusted_proxies_(std::move(trusted_proxies)) {
  rule_index_.reserve(rules_.size());
  for (std::size_t i = 0; i < rules_.size(); ++i) rule_index_.emplace(rules_[i].name(), i);
  group_index_.reserve(groups_.size());
  for (std::size_t i = 0; i < groups_.size(); ++i) group_index_.emplace(groups_[i].name, i);
}

const rule* config::find(std::string_view name) const noexcept {
  const auto it = rule_index_.find(name);
  return it == rule_index_.end() ? nullptr : &rules_[it->second];
}

const group* config::find_group(std::string_view name) const noexcept {
  const auto it = group_index_.find(name);
  return it == group_index_.end() ? nullptr : &groups_[it->second];
}

bool config::is_trusted_proxy(const ip_address& a) const noexcept {
  for (const auto& range : trusted_proxies_)
    if (range.contains(a)) return true;
  return false;
}

std::vector<const rule*> config::rules_of(const group& g) const {
  std::vector<const rule*> out;
  out.reserve(g.rules.size());
  for (auto i : g.rules) out.push_back(&rules_.at(i));
  return out;
}

void config::reserving_policies(std::vector<floodgate::policy>& out) const {
  for (const auto& r : rules_) {
    if (r.policy.reserve() > 0) out.push_back(r.policy);
    if (r.overrides) r.overrides->reserving_policies(out);
  }
}

const rule& config::resolve(const rule& r, std::string_view key) {
  return r.overrides ? r.overrides->resolve(r, key) : r;
}

config parse_config(std::string_view text, std::string_view file_name, placement where) {
  return parser(file_name, where).parse(text);
}

config load_config(const std::string& path, placement where) {
  return parse_config(read_config_file(path), path, where);
}

}  // namespace floodgate::service
