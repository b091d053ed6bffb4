#include "envoy_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "config/config_file.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service::envoy {
namespace {

using field_map = std::map<std::string, std::pair<YAML::Node, int>, std::less<>>;

constexpr std::string_view root_fields[] = {"domain", "descriptors"};
constexpr std::string_view descriptor_fields[] = {"key",         "value",       "rate_limit",
                                                  "descriptors", "shadow_mode", "detailed_metric"};
constexpr std::string_view rate_limit_fields[] = {
    "unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "failure_mode"};

// FNV-1a: a short, stable name for a rule's counters (the policy name is part of the key).
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

class parser {
 public:
  explicit parser(std::string_view file) : file_(file) {}

  domain_config parse(std::string_view text) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::ParserException& e) {
      fail(e.mark.line + 1, "invalid YAML: " + e.msg);
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
    if (s == "true") return true;
    if (s == "false") return false;
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
      if (auto it = fields.find("rate_limit"); it != fields.end()) {
        d.limit = parse_rate_limit(it->second, what, my_path);
        d.limit->shadow_mode = shadow;
        d.limit->detailed_metric = detailed;
        d.limit->metric_name = metric;
      }
      if (auto it = fields.find("descriptors"); it != fields.end())
        d.children = parse_descriptors(it->second, my_path, metric);
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
      for (std::string_view no : {"unit", "requests_per_unit", "algorithm", "failure_mode"})
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
    const auto rpu_text = scalar(rpu_it->second, "requests_per_unit");
    std::uint64_t rpu = 0;
    if (rpu_text.empty() || rpu_text.size() > 10 ||
        !std::all_of(rpu_text.begin(), rpu_text.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) ||
        (rpu = std::stoull(rpu_text)) < 1 || rpu > 0xffffffffULL)
      fail(rpu_it->second.second,
           what + ": requests_per_unit must be an integer from 1 to 4294967295 (got '" + rpu_text +
               "')");
    r.requests_per_unit = static_cast<std::uint32_t>(rpu);

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
    char name[32];
    std::snprintf(name, sizeof name, "envoy.%016llx",
                  static_cast<unsigned long long>(fnv1a(domain_ + path)));
    try {
      r.policy.emplace(name, algo, static_cast<std::int64_t>(r.requests_per_unit),
                       *window_of(r.per), std::nullopt, on_failure);
    } catch (const config_error& e) {
      std::string msg = e.what();
      if (auto colon = msg.find(": "); colon != std::string::npos) msg = msg.substr(colon + 2);
      fail(rpu_it->second.second, what + ": " + msg);
    }
    return r;
  }

  std::string file_;
  std::string domain_;
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

namespace {
// Upstream's lookup at one level: key and value, then a wildcard prefix, then the key alone.
const descriptor_node* find_in(const std::vector<descriptor_node>& nodes, std::string_view k,
                               std::string_view v) noexcept {
  for (const auto& d : nodes)
    if (d.key == k && !d.value.empty() && d.value == v) return &d;
  for (const auto& d : nodes)
    if (d.key == k && !d.value.empty() && d.value.back() == '*' &&  // "*" alone: any value
        v.starts_with(std::string_view(d.value).substr(0, d.value.size() - 1)))
      return &d;
  for (const auto& d : nodes)
    if (d.key == k && d.value.empty()) return &d;
  return nullptr;
}
}  // namespace

const rate_limit* envoy_config::find(std::string_view domain,
                                     const std::vector<descriptor_entry>& entries) const noexcept {
  const auto it = domains_.find(domain);
  if (it == domains_.end()) return nullptr;
  const std::vector<descriptor_node>* level = &it->second.descriptors;
  const rate_limit* found = nullptr;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const descriptor_node* next = find_in(*level, entries[i].key, entries[i].value);
    if (next == nullptr) break;
    // A limit counts only where the request's descriptor ends (upstream's rule).
    if (next->limit && i + 1 == entries.size()) found = &*next->limit;
    if (next->children.empty()) break;
    level = &next->children;
  }
  return found;
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
