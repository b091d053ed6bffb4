#include "config/runtime_overrides.hpp"

#include <algorithm>
#include <tuple>

#include "floodgate/errors.hpp"

namespace floodgate::service {
namespace {

std::string describe(const runtime_override& o) {
  return "override of rule '" + o.rule + "' " +
         (o.spec.kind == match_kind::exact ? "key '" : "prefix '") + o.spec.match + "'";
}

bool same_entry(const runtime_override& o, std::string_view rule, match_kind kind,
                std::string_view match) {
  return o.rule == rule && o.spec.kind == kind && o.spec.match == match;
}

}  // namespace

bool same_base_rule(const rule& a, const rule& b) noexcept {
  return a.policy == b.policy && a.shadow == b.shadow && a.burst_given == b.burst_given &&
         a.key.same_as(b.key);
}

rule_lookup lookup_in(const config& cfg) {
  return [&cfg](std::string_view name) { return cfg.find(name); };
}

const runtime_snapshot::per_rule* runtime_snapshot::of(const floodgate::policy& base) const {
  if (rules_.empty()) return nullptr;
  const auto it = rules_.find(base.name());
  return it == rules_.end() ? nullptr : &it->second;
}

const override_table::entry* runtime_snapshot::find(const rule& base, std::string_view key,
                                                    std::int64_t now) const {
  const auto* r = of(base.policy);
  if (!r || !same_base_rule(r->base, base)) return nullptr;
  return r->table.find(key, now);
}

const override_table::entry* runtime_snapshot::find(const floodgate::policy& base,
                                                    std::string_view key, std::int64_t now) const {
  const auto* r = of(base);
  if (!r || !(r->base.policy == base)) return nullptr;
  return r->table.find(key, now);
}

std::optional<std::string> override_refusal(const rule_lookup& find, const runtime_override& o,
                                            std::int64_t now) {
  const rule* base = find(o.rule);
  if (!base) return "no rule named '" + o.rule + "'";
  if (o.rule.starts_with(envoy_rule_prefix) &&
      (o.spec.fields.window || o.spec.fields.burst || o.spec.fields.block_for ||
       o.spec.fields.on_failure))
    return describe(o) + ": an Envoy rule's override sets only the limit (requests per its unit)";
  if (base->concurrency)
    return "rule '" + o.rule + "' is a concurrency limit: overrides do not apply to it";
  if (o.spec.match.empty() || o.spec.match.size() > max_override_key_size)
    return "the key or prefix must be 1 to " + std::to_string(max_override_key_size) + " bytes";
  if (o.spec.fields.empty())
    return describe(o) + " sets nothing (give limit, window, burst, block_for or failure_mode)";
  // Required: a temporary change must end by itself.
  if (o.spec.expires_at <= now) return describe(o) + ": its expiry must be in the future";
  try {
    (void)apply_fields(*base, o.spec.fields);
  } catch (const config_error& e) {
    return describe(o) + ": " + e.what();
  }
  return std::nullopt;
}

std::optional<std::string> runtime_overrides::set(const rule_lookup& find, runtime_override o,
                                                  std::int64_t now) {
  if (auto why = override_refusal(find, o, now)) return why;
  std::lock_guard lock(mutex_);
  drop_expired(now);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const runtime_override& e) {
    return same_entry(e, o.rule, o.spec.kind, o.spec.match);
  });
  if (it != entries_.end()) {
    *it = std::move(o);
  } else {
    if (entries_.size() >= max_entries_)
      return "the run-time override table is full (" + std::to_string(max_entries_) +
             " entries); remove some or wait for them to expire";
    const auto of_rule = std::count_if(entries_.begin(), entries_.end(),
                                       [&](const runtime_override& e) { return e.rule == o.rule; });
    if (static_cast<std::size_t>(of_rule) >= max_overrides_per_rule)
      return "rule '" + o.rule + "' has " + std::to_string(max_overrides_per_rule) +
             " run-time overrides already";
    entries_.push_back(std::move(o));
  }
  // Every rule's entries are rebuilt against the config at hand: the one the caller decided
  // with.
  publish(find, nullptr);
  return std::nullopt;
}

std::vector<std::string> runtime_overrides::replace(const rule_lookup& find,
                                                    std::vector<runtime_override> entries,
                                                    std::int64_t now) {
  std::vector<std::string> refused;
  std::vector<runtime_override> kept;
  std::map<std::string, std::size_t, std::less<>> of_rule;
  std::map<std::tuple<std::string, match_kind, std::string>, std::size_t> at;  // index in kept
  for (auto& o : entries) {
    if (auto why = override_refusal(find, o, now)) {
      refused.push_back(std::move(*why));
      continue;
    }
    // The last of two equal entries wins, as a second set() would.
    const auto [it, fresh] = at.try_emplace({o.rule, o.spec.kind, o.spec.match}, kept.size());
    if (!fresh) {
      kept[it->second] = std::move(o);
      continue;
    }
    if (kept.size() >= max_entries_ || of_rule[o.rule] >= max_overrides_per_rule) {
      refused.push_back(describe(o) + ": the run-time override table is full");
      at.erase(it);
      continue;
    }
    ++of_rule[o.rule];
    kept.push_back(std::move(o));
  }
  std::lock_guard lock(mutex_);
  entries_ = std::move(kept);
  publish(find, nullptr);
  return refused;
}

bool runtime_overrides::remove(std::string_view rule, match_kind kind, std::string_view match) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const runtime_override& e) {
    return same_entry(e, rule, kind, match);
  });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  // The other entries keep the rules they were built against.
  const auto previous = bases_;
  publish(
      [&](std::string_view name) -> const service::rule* {
        const auto found = previous.find(name);
        return found == previous.end() ? nullptr : &found->second;
      },
      nullptr);
  return true;
}

std::vector<runtime_override> runtime_overrides::list(std::int64_t now) const {
  std::vector<runtime_override> out;
  {
    std::lock_guard lock(mutex_);
    for (const auto& e : entries_)
      if (e.spec.expires_at > now) out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rule, a.spec.kind, a.spec.match) <
           std::tie(b.rule, b.spec.kind, b.spec.match);
  });
  return out;
}

std::vector<std::string> runtime_overrides::rebind(const rule_lookup& find, std::int64_t now) {
  std::vector<std::string> dropped;
  std::lock_guard lock(mutex_);
  drop_expired(now);
  publish(find, &dropped);
  return dropped;
}

void runtime_overrides::drop_expired(std::int64_t now) {
  std::erase_if(entries_, [now](const runtime_override& e) { return e.spec.expires_at <= now; });
}

void runtime_overrides::publish(const rule_lookup& base_of, std::vector<std::string>* dropped) {
  auto next = std::make_shared<runtime_snapshot>();
  std::map<std::string, std::vector<override_spec>, std::less<>> by_rule;
  std::vector<runtime_override> kept;
  kept.reserve(entries_.size());
  for (auto& e : entries_) {
    const rule* base = base_of(e.rule);
    std::optional<std::string> why;
    if (!base || base->concurrency) {
      why = "its rule is gone";
    } else {
      try {
        (void)apply_fields(*base, e.spec.fields);
      } catch (const config_error& err) {
        why = err.what();
      }
    }
    if (why) {
      if (dropped) dropped->push_back(describe(e) + " dropped: " + *why);
      continue;
    }
    by_rule[e.rule].push_back(e.spec);
    kept.push_back(std::move(e));
  }
  entries_ = std::move(kept);
  bases_.clear();
  for (auto& [name, specs] : by_rule) {
    rule base = *base_of(name);
    base.overrides = nullptr;
    bases_.emplace(name, base);
    auto table = build_override_table(base, std::move(specs));
    // By the policy's name: an Envoy rule's entries are named "envoy:..." but resolved by the
    // rate_limit's policy.
    std::string by_policy = base.name();
    next->rules_.emplace(std::move(by_policy),
                         runtime_snapshot::per_rule{std::move(base), std::move(table)});
  }
  current_.store(std::move(next));
}

}  // namespace floodgate::service
