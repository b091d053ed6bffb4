#include "config/override_table.hpp"

#include <algorithm>

#include "floodgate/errors.hpp"

namespace floodgate::service {

floodgate::policy apply_fields(const rule& base, const policy_fields& f) {
  const auto& p = base.policy;
  std::optional<std::int64_t> burst = f.burst;
  if (!burst && base.burst_given) burst = p.burst();
  return floodgate::policy(p.name(), p.algo(), f.limit.value_or(p.limit()),
                           f.window.value_or(p.window()), burst,
                           f.on_failure.value_or(p.on_failure()), p.local_denials())
      .with_block_for(f.block_for.value_or(p.block_for()))
      .with_reserve(p.reserve(), p.reserve_for());
}

override_table build_override_table(const rule& base, std::vector<override_spec> specs) {
  override_table t;
  auto as_rule = [&](const policy_fields& f) {
    rule r = base;
    r.overrides = nullptr;
    r.is_override = true;
    r.policy = apply_fields(base, f);
    return r;
  };
  std::vector<override_table::entry> prefixes;
  for (auto& s : specs) {
    override_table::entry e{std::move(s.match), s.kind,       as_rule(s.fields),
                            s.fields,           s.expires_at, s.tag};
    if (e.kind == match_kind::exact) {
      std::string k = e.match;
      t.exact_.emplace(std::move(k), std::move(e));
    } else {
      prefixes.push_back(std::move(e));
    }
  }
  std::sort(prefixes.begin(), prefixes.end(),
            [](const auto& a, const auto& b) { return a.match < b.match; });
  // Each prefix's parent: the longest earlier entry that is a prefix of it. Every prefix of
  // `m` sorts before `m`, and the entries between a prefix `q` of `m` and `m` all start with
  // `q`; so the parent is on the chain of the previous entry's parents. A stack of the chain
  // keeps the whole pass linear in the number of entries.
  std::vector<std::size_t> chain;
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    while (!chain.empty() && !prefixes[i].match.starts_with(prefixes[chain.back()].match))
      chain.pop_back();
    prefixes[i].parent = chain.empty() ? override_table::npos : chain.back();
    chain.push_back(i);
  }
  t.prefixes_ = std::move(prefixes);
  return t;
}

const override_table::entry* override_table::find(std::string_view key, std::int64_t now) const {
  const auto live = [now](const entry& e) { return e.expires_at == 0 || e.expires_at > now; };
  if (!exact_.empty()) {
    const auto it = exact_.find(key);
    if (it != exact_.end() && live(it->second)) return &it->second;
  }
  if (prefixes_.empty()) return nullptr;
  // The greatest prefix <= key: the longest prefix of key is it or one of its parents.
  auto it = std::upper_bound(prefixes_.begin(), prefixes_.end(), key,
                             [](std::string_view k, const entry& e) { return k < e.match; });
  if (it == prefixes_.begin()) return nullptr;
  std::size_t i = static_cast<std::size_t>(it - prefixes_.begin()) - 1;
  // Parents are prefixes of the candidate, so only their length matters against the part the
  // candidate shares with the key.
  const auto& c = prefixes_[i].match;
  const auto shared = static_cast<std::size_t>(
      std::mismatch(c.begin(), c.end(), key.begin(), key.end()).first - c.begin());
  for (; i != npos; i = prefixes_[i].parent)
    if (prefixes_[i].match.size() <= shared && live(prefixes_[i])) return &prefixes_[i];
  return nullptr;
}

const rule& override_table::resolve(const rule& base, std::string_view key) const {
  const entry* e = find(key);
  return e ? e->as_rule : base;
}

std::vector<const override_table::entry*> override_table::entries() const {
  std::vector<const entry*> out;
  out.reserve(size());
  for (const auto& [k, e] : exact_) out.push_back(&e);
  for (const auto& e : prefixes_) out.push_back(&e);
  return out;
}

void override_table::reserving_policies(std::vector<floodgate::policy>& out) const {
  for (const auto& [k, e] : exact_)
    if (e.as_rule.policy.reserve() > 0) out.push_back(e.as_rule.policy);
  for (const auto& e : prefixes_)
    if (e.as_rule.policy.reserve() > 0) out.push_back(e.as_rule.policy);
}

}  // namespace floodgate::service
