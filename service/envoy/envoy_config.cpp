#include "envoy_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "config/config_file.hpp"
#include "config/override_table.hpp"
#include "config/yaml_problem.hpp"
#include "floodgate/duration.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service::envoy {
namespace {

using field_map = std::map<std::string, std::pair<YAML::Node, int>, std::less<>>;

constexpr std::string_view root_fields[] = {"domain", "descriptors"};
constexpr std::string_view descriptor_fields[] = {
    "key",         "value",           "rate_limit",      "descriptors",
    "shadow_mode", "detailed_metric", "value_to_metric", "share_threshold",
    "metadata",    "quota_mode"};

// YAML 1.1's booleans, as upstream's parser (gopkg.in/yaml.v2) reads them into a bool field;
// a quoted "true" is a string there, and refused.
constexpr std::string_view yaml_true[] = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                          "True", "TRUE", "on",  "On",  "ON"};
constexpr std::string_view yaml_false[] = {"n",     "N",     "no",  "No",  "NO", "false",
                                           "False", "FALSE", "off", "Off", "OFF"};
constexpr std::string_view rate_limit_fields[] = {
    "unit",      "requests_per_unit", "unlimited", "name", "replaces", "unit_multiplier",
    "algorithm", "failure_mode",      "overrides", "reserve", "reserve_for"};
constexpr std::string_view override_fields[] = {"value", "prefix", "requests_per_unit", "unit",
                                                "unit_multiplier"};

// FNV-1a: a short, stable name for a rule's counters (the policy name is part of the key).
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// A policy's own complaint without its "NAME: " (an envoy.<hash> name means nothing to whoever
// wrote the config).
std::string policy_error(const config_error& e) {
  std::string msg = e.what();
  if (auto colon = msg.find(": "); colon != std::string::npos) msg.erase(0, colon + 2);
  return msg;
}

std::shared_ptr<const level_index> index_of(const std::vector<descriptor_node>& nodes) {
  auto index = std::make_shared<level_index>();
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    const auto& d = nodes[i];
    auto& by_key = index->keys[d.key];
    if (d.value.empty()) {
      by_key.key_only = i;
      continue;
    }
    by_key.values.emplace(d.value, i);
    if (d.wildcard) by_key.wildcards.push_back(i);
  }
  return index;
}

class parser {
 public:
  explicit parser(std::string_view file) : file_(file) {}

  domain_config parse(std::string_view text) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::ParserException& e) {
      fail(e.mark.line + 1, yaml_problem(e));
    }
    if (!root.IsDefined() || root.IsNull()) fail(1, "the file is empty; expected 'domain:'");
    if (!root.IsMap()) fail(line(root), "expected a map with 'domain:' and 'descriptors:'");
    const auto fields = fields_of(root, "the file", root_fields);
    const auto domain_it = fields.find("domain");
    if (domain_it == fields.end()) fail(line(root), "missing field 'domain'");
    domain_config d;
    d.name = scalar(domain_it->second, "domain");
    if (d.name.empty()) fail(domain_it->second.second, "'domain' must not be empty");
    d.file = file_;
    domain_ = d.name;
    if (auto it = fields.find("descriptors"); it != fields.end())
      d.descriptors = parse_descriptors(it->second, d.name, "");
    d.index = index_of(d.descriptors);
    return d;
  }

 private:
  [[noreturn]] void fail(int at, const std::string& what) const {
    throw config_error(file_ + ":" + std::to_string(at) + ": " + what);
  }
  static int line(const YAML::Node& n) { return n.Mark().line + 1; }

  template <std::size_t N>
  field_map fields_of(const YAML::Node& node, const std::string& what,
                      const std::string_view (&known)[N]) const {
    field_map fields;
    for (const auto& kv : node) {
      const auto key = kv.first.Scalar();
      const int at = line(kv.first);
      if (std::find(std::begin(known), std::end(known), key) == std::end(known)) {
        std::string expected;
        for (auto k : known) expected += (expected.empty() ? "" : ", ") + std::string(k);
        fail(at, what + ": unknown field '" + key + "' (expected " + expected + ")");
      }
      if (!fields.emplace(key, std::pair{kv.second, at}).second)
        fail(at, what + ": duplicate field '" + key + "'");
    }
    return fields;
  }

  std::string scalar(const std::pair<YAML::Node, int>& f, std::string_view name) const {
    if (!f.first.IsScalar()) fail(f.second, "'" + std::string(name) + "' must be a string");
    return f.first.Scalar();
  }

  bool boolean(const std::pair<YAML::Node, int>& f, std::string_view name) const {
    const auto s = f.first.IsScalar() ? f.first.Scalar() : std::string();
    const bool plain = f.first.IsScalar() && f.first.Tag() != "!";  // "!": quoted
    auto in = [&s](const auto& set) {
      return std::find(std::begin(set), std::end(set), s) != std::end(set);
    };
    if (plain && in(yaml_true)) return true;
    if (plain && in(yaml_false)) return false;
    fail(f.second, "'" + std::string(name) + "' must be true or false (got '" + s + "')");
  }

  std::vector<descriptor_node> parse_descriptors(const std::pair<YAML::Node, int>& f,
                                                 const std::string& path,
                                                 const std::string& metric_prefix) {
    if (f.first.IsNull()) return {};
    if (!f.first.IsSequence()) fail(f.second, "'descriptors' must be a list");
    std::vector<descriptor_node> out;
    std::map<std::string, int> seen;  // key + '\0' + value → line
    for (const auto& node : f.first) {
      if (!node.IsMap()) fail(line(node), "a descriptor must be a map with 'key:'");
      const auto fields = fields_of(node, "descriptor", descriptor_fields);
      descriptor_node d;
      const auto key_it = fields.find("key");
      if (key_it == fields.end()) fail(line(node), "descriptor: missing field 'key'");
      d.key = scalar(key_it->second, "key");
      if (d.key.empty()) fail(key_it->second.second, "descriptor: 'key' must not be empty");
      if (auto it = fields.find("value"); it != fields.end()) d.value = scalar(it->second, "value");
      const std::string what =
          "descriptor '" + d.key + (d.value.empty() ? "" : "_" + d.value) + "'";
      const auto [first, fresh] = seen.emplace(d.key + '\0' + d.value, line(node));
      if (!fresh)
        fail(line(node),
             what + ": duplicate descriptor (first at line " + std::to_string(first->second) + ")");
      const std::string my_path = path + '\0' + d.key + '\0' + d.value;
      const std::string metric = metric_prefix + (metric_prefix.empty() ? "" : ".") + d.key +
                                 (d.value.empty() ? "" : "_" + d.value);
      bool shadow = false;
      if (auto it = fields.find("shadow_mode"); it != fields.end())
        shadow = boolean(it->second, "shadow_mode");
      bool detailed = false;
      if (auto it = fields.find("detailed_metric"); it != fields.end())
        detailed = boolean(it->second, "detailed_metric");
      d.wildcard = d.value.find('*') != std::string::npos;
      if (auto it = fields.find("value_to_metric"); it != fields.end())
        d.value_to_metric = boolean(it->second, "value_to_metric");
      if (auto it = fields.find("share_threshold"); it != fields.end()) {
        d.share_threshold = boolean(it->second, "share_threshold");
        // As upstream: without a wildcard there is nothing to share.
        if (d.share_threshold && !d.wildcard)
          fail(it->second.second, what + ": share_threshold needs a wildcard value (one with '*')");
      }
      if (auto it = fields.find("metadata"); it != fields.end() && !it->second.first.IsMap())
        fail(it->second.second, what + ": 'metadata' must be a map");
      if (auto it = fields.find("quota_mode");
          it != fields.end() && boolean(it->second, "quota_mode"))
        fail(it->second.second,
             what +
                 ": quota_mode: true is not supported: upstream answers OK over the limit and "
                 "names the descriptor in the response's dynamic_metadata, which floodgated does "
                 "not send (shadow_mode: true answers OK over the limit without it)");
      if (auto it = fields.find("rate_limit"); it != fields.end()) {
        d.limit = parse_rate_limit(it->second, what, my_path);
        d.limit->shadow_mode = shadow;
        d.limit->detailed_metric = detailed;
        d.limit->metric_name = metric;
        // One counter for every matching value: a value's own limit would decide it for all.
        if (d.share_threshold && d.limit->overrides)
          fail(it->second.second,
               what +
                   ": overrides cannot be used with share_threshold (every matching value "
                   "counts on one counter)");
      }
      if (auto it = fields.find("descriptors"); it != fields.end()) {
        d.children = parse_descriptors(it->second, my_path, metric);
        d.children_index = index_of(d.children);
      }
      out.push_back(std::move(d));
    }
    return out;
  }

  rate_limit parse_rate_limit(const std::pair<YAML::Node, int>& f, const std::string& what_of,
                              const std::string& path) {
    const std::string what = what_of + ": rate_limit";
    if (!f.first.IsMap()) fail(f.second, what + " must be a map");
    const auto fields = fields_of(f.first, what, rate_limit_fields);
    rate_limit r;
    if (auto it = fields.find("name"); it != fields.end()) r.name = scalar(it->second, "name");
    if (auto it = fields.find("unlimited"); it != fields.end())
      r.unlimited = boolean(it->second, "unlimited");
    if (auto it = fields.find("replaces"); it != fields.end()) {
      if (!it->second.first.IsSequence())
        fail(it->second.second, what + ": 'replaces' must be a list of {name: ...}");
      for (const auto& rep : it->second.first) {
        if (!rep.IsMap() || !rep["name"] || !rep["name"].IsScalar() || rep.size() != 1 ||
            rep["name"].Scalar().empty())
          fail(line(rep), what + ": each of 'replaces' must be {name: NAME} with a non-empty NAME");
        // As upstream: it would drop itself from every request it matches.
        if (rep["name"].Scalar() == r.name)
          fail(line(rep), what + ": 'replaces' names this limit itself ('" + r.name + "')");
        r.replaces.push_back(rep["name"].Scalar());
      }
    }
    const auto unit_it = fields.find("unit");
    const auto rpu_it = fields.find("requests_per_unit");
    if (r.unlimited) {
      for (std::string_view no : {"unit", "requests_per_unit", "unit_multiplier", "algorithm",
                                  "failure_mode", "overrides", "reserve", "reserve_for"})
        if (auto it = fields.find(no); it != fields.end())
          fail(it->second.second,
               what + ": 'unlimited: true' contradicts '" + std::string(no) + "'");
      return r;
    }
    if (unit_it == fields.end()) fail(f.second, what + ": missing field 'unit'");
    const auto unit_text = scalar(unit_it->second, "unit");
    const auto u = parse_unit(unit_text);
    if (!u)
      fail(unit_it->second.second,
           what + ": unit must be second, minute, hour, day, week, month or year (got '" +
               unit_text + "')");
    r.per = *u;
    if (rpu_it == fields.end()) fail(f.second, what + ": missing field 'requests_per_unit'");
    r.requests_per_unit = uint32_field(rpu_it->second, "requests_per_unit", what, 0);
    if (auto it = fields.find("unit_multiplier"); it != fields.end())
      r.unit_multiplier = uint32_field(it->second, "unit_multiplier", what, 1);

    auto algo = algorithm::fixed_window;
    if (auto it = fields.find("algorithm"); it != fields.end()) {
      const auto text = scalar(it->second, "algorithm");
      const auto a = parse_algorithm(text);
      if (!a)
        fail(it->second.second, what +
                                    ": algorithm must be one of sliding_log, sliding_window, "
                                    "fixed_window, token_bucket, gcra (got '" +
                                    text + "')");
      algo = *a;
    }
    auto on_failure = failure_mode::closed;
    if (auto it = fields.find("failure_mode"); it != fields.end()) {
      const auto text = scalar(it->second, "failure_mode");
      const auto m = parse_failure_mode(text);
      if (!m)
        fail(it->second.second,
             what + ": failure_mode must be open or closed (got '" + text + "')");
      on_failure = *m;
    }
    // floodgate's own (docs/algorithms.md, "Reservations"), as in the rules file: reserve_for
    // defaults to 1 s, or the window if shorter.
    const auto reserve_it = fields.find("reserve");
    const std::int64_t reserve =
        reserve_it == fields.end() ? 0 : uint32_field(reserve_it->second, "reserve", what, 1);
    auto reserve_for = std::min(r.window(), std::chrono::milliseconds{1000});
    if (auto it = fields.find("reserve_for"); it != fields.end()) {
      if (reserve == 0) fail(it->second.second, what + ": reserve_for applies only with reserve");
      const auto text = scalar(it->second, "reserve_for");
      const auto d = parse_duration(text);
      if (!d)
        fail(it->second.second,
             what + ": reserve_for must be a duration such as 500ms or 1s (got '" + text + "')");
      reserve_for = *d;
    }
    if (r.requests_per_unit == 0) {  // over the limit whatever the count: no counter
      if (auto it = fields.find("overrides"); it != fields.end())
        fail(it->second.second, what + ": overrides need requests_per_unit of at least 1");
      if (reserve_it != fields.end())
        fail(reserve_it->second.second, what + ": reserve needs requests_per_unit of at least 1");
      return r;
    }
    char name[32];
    std::snprintf(name, sizeof name, "envoy.%016llx",
                  static_cast<unsigned long long>(fnv1a(domain_ + path)));
    try {
      r.policy.emplace(name, algo, static_cast<std::int64_t>(r.requests_per_unit), r.window(),
                       std::nullopt, on_failure);
    } catch (const config_error& e) {
      fail(rpu_it->second.second, what + ": " + policy_error(e));
    }
    if (reserve > 0) {
      try {
        r.policy = r.policy->with_reserve(reserve, reserve_for);
      } catch (const config_error& e) {
        fail(reserve_it->second.second, what + ": " + policy_error(e));
      }
    }
    if (auto it = fields.find("overrides"); it != fields.end())
      r.overrides = std::make_shared<const override_table>(parse_overrides(r, it->second, what));
    return r;
  }

  // An integer from `low` to 4294967295, as upstream's uint32 fields.
  std::uint32_t uint32_field(const std::pair<YAML::Node, int>& f, std::string_view name,
                             const std::string& what, std::uint64_t low) const {
    const auto text = scalar(f, name);
    std::uint64_t n = 0;
    if (text.empty() || text.size() > 10 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        (n = std::stoull(text)) < low || n > 0xffffffffULL)
      fail(f.second, what + ": " + std::string(name) + " must be an integer from " +
                         std::to_string(low) + " to 4294967295 (got '" + text + "')");
    return static_cast<std::uint32_t>(n);
  }

  // A rate_limit's `overrides:`: [{value or prefix, requests_per_unit, unit, unit_multiplier}].
  override_table parse_overrides(const rate_limit& r, const std::pair<YAML::Node, int>& f,
                                 const std::string& what) {
    const auto& list = f.first;
    if (!list.IsSequence())
      fail(f.second, what +
                         ": overrides must be a list of {value or prefix, requests_per_unit, "
                         "unit, unit_multiplier}");
    if (list.size() > max_overrides_per_rule)
      fail(f.second, what + ": at most " + std::to_string(max_overrides_per_rule) +
                         " overrides per rate_limit (got " + std::to_string(list.size()) + ")");
    overrides_total_ += list.size();
    if (overrides_total_ > max_overrides_total)
      fail(f.second,
           what + ": more than " + std::to_string(max_overrides_total) + " overrides in the file");
    const rule base{*r.policy, {}};
    std::vector<override_spec> specs;
    std::map<std::pair<match_kind, std::string>, int> seen;
    for (const auto& node : list) {
      if (!node.IsMap()) fail(line(node), what + ": each override must be a map");
      const auto fields = fields_of(node, what + ": override", override_fields);
      const auto value_it = fields.find("value");
      const auto prefix_it = fields.find("prefix");
      if ((value_it == fields.end()) == (prefix_it == fields.end()))
        fail(line(node), what +
                             ": an override takes value (one value) or prefix (every value "
                             "starting with it), one of them");
      override_spec spec;
      spec.kind = value_it != fields.end() ? match_kind::exact : match_kind::prefix;
      const auto& m = spec.kind == match_kind::exact ? value_it->second : prefix_it->second;
      const char* m_name = spec.kind == match_kind::exact ? "value" : "prefix";
      spec.match = scalar(m, m_name);
      if (spec.match.empty() || spec.match.size() > max_override_key_size)
        fail(m.second, what + ": an override's " + m_name + " must be 1 to " +
                           std::to_string(max_override_key_size) + " bytes");
      const std::string owhat = what + ": override of " + m_name + " '" + spec.match + "'";
      const auto [first, fresh] = seen.emplace(std::pair{spec.kind, spec.match}, m.second);
      if (!fresh)
        fail(m.second, owhat + ": duplicate " + m_name + " (first at line " +
                           std::to_string(first->second) + ")");
      auto per = r.per;
      auto multiplier = r.unit_multiplier;
      if (auto it = fields.find("requests_per_unit"); it != fields.end())
        spec.fields.limit = uint32_field(it->second, "requests_per_unit", owhat, 1);
      if (auto it = fields.find("unit"); it != fields.end()) {
        const auto text = scalar(it->second, "unit");
        const auto u = parse_unit(text);
        if (!u)
          fail(it->second.second,
               owhat + ": unit must be second, minute, hour, day, week, month or year (got '" +
                   text + "')");
        per = *u;
      }
      if (auto it = fields.find("unit_multiplier"); it != fields.end())
        multiplier = uint32_field(it->second, "unit_multiplier", owhat, 1);
      if (per != r.per || multiplier != r.unit_multiplier)
        spec.fields.window = *window_of(per) * multiplier;
      if (spec.fields.empty())
        fail(line(node), owhat +
                             ": sets nothing (give requests_per_unit, unit or "
                             "unit_multiplier)");
      spec.tag = static_cast<std::uint32_t>(per);
      try {
        (void)apply_fields(base, spec.fields);
      } catch (const config_error& e) {
        fail(line(node), owhat + ": " + policy_error(e));
      }
      specs.push_back(std::move(spec));
    }
    return build_override_table(base, std::move(specs));
  }

  std::string file_;
  std::string domain_;
  std::size_t overrides_total_ = 0;
};

void count_rules(const std::vector<descriptor_node>& nodes, std::size_t& n) {
  for (const auto& d : nodes) {
    if (d.limit) ++n;
    count_rules(d.children, n);
  }
}

}  // namespace

std::optional<std::chrono::milliseconds> window_of(unit u) noexcept {
  using namespace std::chrono;
  switch (u) {
    case unit::second:
      return seconds{1};
    case unit::minute:
      return minutes{1};
    case unit::hour:
      return hours{1};
    case unit::day:
      return hours{24};
    case unit::week:
      return hours{24 * 7};
    case unit::month:
      return hours{24 * 30};
    case unit::year:
      return hours{24 * 365};
    case unit::unknown:
      break;
  }
  return std::nullopt;
}

std::optional<unit> parse_unit(std::string_view text) noexcept {
  std::string lower(text);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int i = 1; i <= 7; ++i)
    if (to_string(static_cast<unit>(i)) == lower) return static_cast<unit>(i);
  return std::nullopt;
}

std::string_view to_string(unit u) noexcept {
  switch (u) {
    case unit::second:
      return "second";
    case unit::minute:
      return "minute";
    case unit::hour:
      return "hour";
    case unit::day:
      return "day";
    case unit::week:
      return "week";
    case unit::month:
      return "month";
    case unit::year:
      return "year";
    case unit::unknown:
      break;
  }
  return "unknown";
}

bool glob_match(std::string_view pattern, std::string_view value) noexcept {
  const auto star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == value;
  const auto last = pattern.rfind('*');
  const auto head = pattern.substr(0, star), tail = pattern.substr(last + 1);
  if (value.size() < head.size() + tail.size() || !value.starts_with(head) ||
      !value.ends_with(tail))
    return false;
  // The runs between the first and the last '*', each at its leftmost place after the one
  // before: a leftmost match leaves the most room for the rest, so no backtracking is needed.
  // memmem is linear (glibc's two-way search), so the whole match is too.
  std::string_view rest = value.substr(head.size(), value.size() - head.size() - tail.size());
  std::string_view middle = pattern.substr(star + 1, last > star ? last - star - 1 : 0);
  while (!middle.empty()) {
    const auto next = middle.find('*');
    const std::size_t run = next == std::string_view::npos ? middle.size() : next;
    if (run > 0) {
      const void* at = ::memmem(rest.data(), rest.size(), middle.data(), run);
      if (at == nullptr) return false;
      const auto offset = static_cast<std::size_t>(static_cast<const char*>(at) - rest.data());
      rest.remove_prefix(offset + run);
    }
    if (next == std::string_view::npos) break;
    middle.remove_prefix(next + 1);
  }
  return true;
}

namespace {

enum class matched_by { value, wildcard, key_only };

// Upstream's lookup at one level: key and value, then the first wildcard that matches, then the
// key alone.
const descriptor_node* find_in(const std::vector<descriptor_node>& nodes, const level_index& index,
                               const descriptor_entry& e, matched_by& how) noexcept {
  const auto k = index.keys.find(e.key);
  if (k == index.keys.end()) return nullptr;
  const auto& by_key = k->second;
  if (auto v = by_key.values.find(e.value); v != by_key.values.end()) {
    how = matched_by::value;
    return &nodes[v->second];
  }
  for (const auto w : by_key.wildcards)
    if (glob_match(nodes[w].value, e.value)) {
      how = matched_by::wildcard;
      return &nodes[w];
    }
  if (by_key.key_only) {
    how = matched_by::key_only;
    return &nodes[*by_key.key_only];
  }
  return nullptr;
}

// Upstream's stats key below the domain when it depends on the request: detailed_metric names
// every entry as key_value (a shared pattern in place of its values); otherwise value_to_metric
// puts the request's value where the rule has a wildcard or no value, and share_threshold the
// pattern.
std::string metric_of(const std::vector<descriptor_entry>& entries,
                      const std::vector<const descriptor_node*>& path,
                      const std::vector<matched_by>& how, bool detailed) {
  std::string out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const auto& node = *path[i];
    const bool shared = how[i] == matched_by::wildcard && node.share_threshold;
    if (!out.empty()) out += '.';
    out += e.key;
    if (detailed) {
      out += '_';
      out += shared ? std::string_view(node.value) : std::string_view(e.value);
      continue;
    }
    switch (how[i]) {
      case matched_by::value:
        out += '_';
        out += e.value;
        break;
      case matched_by::wildcard:
        out += '_';
        out += shared || !node.value_to_metric ? std::string_view(node.value)
                                               : std::string_view(e.value);
        break;
      case matched_by::key_only:
        if (node.value_to_metric && !e.value.empty()) out += '_' + e.value;
        break;
    }
  }
  return out;
}

}  // namespace

rule_match envoy_config::match(std::string_view domain,
                               const std::vector<descriptor_entry>& entries) const {
  rule_match m;
  const auto it = domains_.find(domain);
  if (it == domains_.end()) return m;
  const std::vector<descriptor_node>* level = &it->second.descriptors;
  const level_index* index = it->second.index.get();
  const descriptor_node* leaf = nullptr;
  bool by_request = false;  // a node on the way names metrics or counters by the request
  for (std::size_t i = 0; i < entries.size() && index; ++i) {
    auto how = matched_by::value;
    const descriptor_node* next = find_in(*level, *index, entries[i], how);
    if (next == nullptr) break;
    by_request = by_request || next->value_to_metric ||
                 (next->share_threshold && how == matched_by::wildcard);
    // A limit counts only where the request's descriptor ends (upstream's rule).
    if (next->limit && i + 1 == entries.size()) leaf = next;
    if (next->children.empty()) break;
    level = &next->children;
    index = next->children_index.get();
  }
  if (leaf == nullptr) return m;
  m.limit = &*leaf->limit;
  if (!by_request && !m.limit->detailed_metric) return m;

  // Rare: walk again, keeping the way, to name the metric and the counter by the request.
  std::vector<const descriptor_node*> path;
  std::vector<matched_by> how(entries.size());
  level = &it->second.descriptors;
  index = it->second.index.get();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    path.push_back(find_in(*level, *index, entries[i], how[i]));
    level = &path.back()->children;
    index = path.back()->children_index.get();
  }
  m.metric_name = metric_of(entries, path, how, m.limit->detailed_metric);
  if (m.metric_name == m.limit->metric_name) m.metric_name.clear();
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (how[i] == matched_by::wildcard && path[i]->share_threshold) {
      if (m.counter_entries.empty()) m.counter_entries = entries;
      m.counter_entries[i].value = path[i]->value;
    }
  return m;
}

std::size_t envoy_config::rule_count() const noexcept {
  std::size_t n = 0;
  for (const auto& [name, d] : domains_) count_rules(d.descriptors, n);
  return n;
}

void parse_envoy_domain(std::string_view text, std::string_view file_name,
                        std::map<std::string, domain_config, std::less<>>& into) {
  auto d = parser(file_name).parse(text);
  if (auto it = into.find(d.name); it != into.end())
    throw config_error(std::string(file_name) + ":1: duplicate domain '" + d.name + "' (also in " +
                       it->second.file + ")");
  into.emplace(d.name, std::move(d));
}

std::shared_ptr<const envoy_config> load_envoy_config(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::map<std::string, domain_config, std::less<>> domains;
  auto load_file = [&](const fs::path& p) {
    parse_envoy_domain(read_config_file(p.string()), p.string(), domains);
  };
  for (const auto& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.is_regular_file() &&
            (e.path().extension() == ".yaml" || e.path().extension() == ".yml"))
          files.push_back(e.path());
      if (ec) throw config_error(path + ": cannot list the directory: " + ec.message());
      std::sort(files.begin(), files.end());  // messages and duplicates in a stable order
      for (const auto& f : files) load_file(f);
    } else {
      load_file(path);
    }
  }
  return std::make_shared<const envoy_config>(std::move(domains));
}

}  // namespace floodgate::service::envoy
