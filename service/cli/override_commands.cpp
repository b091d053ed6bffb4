// floodgate override set|list|remove (override_commands.hpp).
#include "cli/override_commands.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/rules_in_force.hpp"
#include "cli/subcommands.hpp"
#include "config/config.hpp"
#include "config/runtime_overrides.hpp"
#include "envoy_rule_names.hpp"
#include "floodgate/duration.hpp"
#include "rules/overrides_entries.hpp"
#include "rules/overrides_store.hpp"

namespace floodgate::service {
namespace {

using namespace cli;

using namespace std::chrono_literals;

constexpr const char* override_usage =
    R"(usage: floodgate override set URL#NAME RULE KEY --limit N [--window D] [--burst N]
                                [--prefix] --for DURATION
       floodgate override list URL#NAME
       floodgate override remove URL#NAME RULE KEY [--prefix]

  set     give KEY (with --prefix: every key starting with KEY) its own limit under RULE,
          in every floodgated --rules-from URL#NAME within 1 s, until DURATION from now
          (--for is required: a temporary raise cannot be forgotten). RULE must be in the
          rules version in force, and the fields must suit its algorithm. Setting the same
          RULE and KEY again replaces the entry. An Envoy rate_limit is named
          envoy:DOMAIN:KEY=VALUE,...,KEY (its descriptor path; '%', ':', ',' and '=' inside
          written %25 %3A %2C %3D); KEY is then a value of the last entry, and only --limit
          is taken (requests per the rule's unit). docs/envoy.md.
  list    the live entries with the time each has left; an entry the rules version in force
          does not take (its rule is gone, or no longer takes its fields) is marked
          NOT IN FORCE with the reason. Expired entries are gone: never listed.
  remove  end an entry now.
)";

std::int64_t parse_count(std::string_view flag, std::string_view v) {
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size())
    usage(std::string(flag) + ": '" + std::string(v) + "' is not a whole number");
  return n;
}

std::chrono::milliseconds parse_time(std::string_view flag, std::string_view v) {
  const auto d = parse_duration(v);
  if (!d || d->count() <= 0)
    usage(std::string(flag) + ": '" + std::string(v) + "' is not a duration (like 90s, 15m, 1h)");
  return *d;
}

// "1h02m03s", "59s", "0.4s": time left, to the second (tenths under 10 s).
std::string left(std::int64_t ms) {
  if (ms < 10'000) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000);
    return buf;
  }
  const auto s = ms / 1000;
  std::string out;
  if (s >= 3600) out += std::to_string(s / 3600) + "h";
  if (s >= 60) out += std::to_string(s / 60 % 60) + "m";
  return out + std::to_string(s % 60) + "s";
}

std::string describe(const stored_override& o) {
  std::string out = o.rule + (o.prefix ? " prefix '" : " key '") + o.key + "'";
  if (o.limit) out += " limit=" + std::to_string(*o.limit);
  if (o.window_ms) out += " window=" + std::to_string(*o.window_ms) + "ms";
  if (o.burst) out += " burst=" + std::to_string(*o.burst);
  return out;
}

int set(const std::vector<std::string_view>& args) {
  std::vector<std::string_view> positional;
  stored_override o;
  std::optional<std::chrono::milliseconds> for_time;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto a = args[i];
    auto value = [&]() {
      if (i + 1 >= args.size()) usage(std::string(a) + " needs a value");
      return args[++i];
    };
    if (a == "--limit")
      o.limit = parse_count(a, value());
    else if (a == "--window")
      o.window_ms = parse_time(a, value()).count();
    else if (a == "--burst")
      o.burst = parse_count(a, value());
    else if (a == "--for")
      for_time = parse_time(a, value());
    else if (a == "--prefix")
      o.prefix = true;
    else if (a.starts_with("--"))
      usage("set: unknown option '" + std::string(a) + "'");
    else
      positional.push_back(a);
  }
  if (positional.size() != 3) usage("set needs URL#NAME, RULE and KEY");
  if (!for_time)
    usage("set needs --for DURATION: a run-time override always ends by itself (like --for 1h)");
  if (!o.limit && !o.window_ms && !o.burst) usage("set needs --limit, --window or --burst");
  const auto r = parse_ref(positional[0]);
  o.rule = positional[1];
  o.key = positional[2];

  const auto now = unix_ms_now();
  override_spec spec{
      o.key, o.prefix ? match_kind::prefix : match_kind::exact, {}, now + for_time->count()};
  spec.fields.limit = o.limit;
  if (o.window_ms) spec.fields.window = std::chrono::milliseconds(*o.window_ms);
  spec.fields.burst = o.burst;
  const runtime_override entry{o.rule, std::move(spec)};
  std::string note;
  if (o.rule.starts_with(envoy_rule_prefix)) {
    // The Envoy config is each floodgated's own file: the name and fields are checked here,
    // the rule by every instance (one without it logs "run-time override not applied").
    std::string why;
    if (!envoy::parse_envoy_rule_name(o.rule, why)) usage(why);
    if (o.window_ms || o.burst)
      usage("an Envoy rule's override sets only --limit (requests per the rule's unit)");
    if (*o.limit < 1 || *o.limit > 0xffffffffLL)
      usage("--limit: an Envoy rule's requests_per_unit is 1 to 4294967295");
    note = " (an Envoy rule: each floodgated --envoy-config applies it if it has that rule)";
  } else {
    // Validated against the rules in force exactly as floodgated's table will take it.
    const auto in_force = read_rules_in_force(r);
    runtime_overrides check;
    if (auto why = check.set(in_force.rules, entry, now)) fail(in_force.name + ": " + *why);
    o.rules_version = in_force.version;  // so that `list` can tell when the rule changes
  }

  overrides_store s(r, store_timeout);
  const auto done = s.set(o, for_time->count(), rules_author());
  if (!done.error.empty()) fail(r.describe() + ": cannot set: " + done.error);
  if (!done.done) fail(done.refused);
  std::printf("set %s for %s (run-time overrides version %lld)%s\n", describe(o).c_str(),
              left(for_time->count()).c_str(), static_cast<long long>(done.version), note.c_str());
  return 0;
}

int list(const std::vector<std::string_view>& args) {
  if (args.size() != 1 || args[0].starts_with("--")) usage("list needs URL#NAME");
  const auto r = parse_ref(args[0]);
  overrides_store s(r, store_timeout);
  if (!s.why_not().empty()) fail(r.describe() + ": " + s.why_not());
  const auto l = s.list();
  if (!l.error.empty()) fail(r.describe() + ": cannot read: " + l.error);
  if (l.entries.empty()) {
    std::printf("no run-time overrides in %s\n", r.describe().c_str());
    return 0;
  }
  // Each entry judged against the rules version in force, as every floodgated judges it.
  // Expired entries are never listed: every read of the store drops them first.
  std::optional<rules_in_force> in_force;
  std::string unjudged;
  try {
    in_force.emplace(read_rules_in_force(r));
  } catch (const failure& f) {
    unjudged = f.message;
  }
  const auto now = unix_ms_now();
  std::map<std::int64_t, std::optional<config>> versions;  // set under, read once each
  for (const auto& o : l.entries) {
    std::string state;
    if (o.rule.starts_with(envoy_rule_prefix)) {
      state = "  (an Envoy rule: in force where a floodgated --envoy-config has it)";
    } else if (!in_force) {
      state = "  (not checked against the rules: " + unjudged + ")";
    } else if (auto why = override_refusal(lookup_in(in_force->rules),
                                           runtime_entry(o, l.redis_now_ms, now), now)) {
      state = "  NOT IN FORCE under " + in_force->name + ": " + *why;
    } else if (o.rules_version != 0 && o.rules_version != in_force->version) {
      // In force, rebuilt on the rule as it is now: say so when that rule is not the one the
      // entry was set against (a raise of a limit may mean something else on a new window).
      auto [at, fresh] = versions.try_emplace(o.rules_version);
      std::string why_not;
      if (fresh) at->second = read_rules_at(r, o.rules_version, why_not);
      const rule* then = at->second ? at->second->find(o.rule) : nullptr;
      const rule* now_rule = in_force->rules.find(o.rule);
      if (!then || !same_base_rule(*then, *now_rule))
        state = "  (set under v" + std::to_string(o.rules_version) + "; rule '" + o.rule +
                "' changed since: it applies to " + in_force->name + "'s)";
    }
    std::printf("%s  %s left  (by %s)%s\n", describe(o).c_str(),
                left(o.expires_at_ms - l.redis_now_ms).c_str(), o.by.c_str(), state.c_str());
  }
  return 0;
}

int remove(const std::vector<std::string_view>& args) {
  std::vector<std::string_view> positional;
  bool prefix = false;
  for (const auto a : args) {
    if (a == "--prefix")
      prefix = true;
    else if (a.starts_with("--"))
      usage("remove: unknown option '" + std::string(a) + "'");
    else
      positional.push_back(a);
  }
  if (positional.size() != 3) usage("remove needs URL#NAME, RULE and KEY");
  const auto r = parse_ref(positional[0]);
  overrides_store s(r, store_timeout);
  if (!s.why_not().empty()) fail(r.describe() + ": " + s.why_not());
  const std::string rule(positional[1]), key(positional[2]);
  const auto done = s.remove(rule, prefix, key);
  if (!done.error.empty()) fail(r.describe() + ": cannot remove: " + done.error);
  const auto what = rule + (prefix ? " prefix '" : " key '") + key + "'";
  if (!done.done)
    fail(r.describe() + ": no run-time override of " + what + " (expired, or never set)");
  std::printf("removed %s (run-time overrides version %lld)\n", what.c_str(),
              static_cast<long long>(done.version));
  return 0;
}

}  // namespace

int override_command(int argc, char** argv) {
  return cli::run_subcommand(argc, argv, "override", override_usage,
                             {{"set", set}, {"list", list}, {"remove", remove}});
}

}  // namespace floodgate::service
