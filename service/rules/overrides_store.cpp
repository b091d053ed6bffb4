#include "rules/overrides_store.hpp"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "rules/script_error.hpp"

namespace floodgate::service {
namespace {

// Every script starts here: Redis's now, and the expired entries dropped (KEYS[1]: the hash).
// An entry whose value does not parse is dropped too: nothing could apply it.
constexpr const char* prologue = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local exp = tonumber(string.match(all[i + 1], '^[^\t]*\t[^\t]*\t[^\t]*\t(%d+)\t'))
  if exp == nil or exp <= now then redis.call('HDEL', KEYS[1], all[i]) end
end
)lua";

// KEYS: hash, version. ARGV: field, limit, window_ms, burst, for_ms, by, bound, channel,
// rules_version. Returns {1, version, expires_at} or {0, entries} (full).
constexpr const char* set_body = R"lua(
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and
   redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[7]) then
  return {0, redis.call('HLEN', KEYS[1])}
end
local exp = now + tonumber(ARGV[5])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '\t' .. ARGV[3] .. '\t' .. ARGV[4] .. '\t' ..
           string.format('%d', exp) .. '\t' .. ARGV[6] .. '\t' .. string.format('%d', now) ..
           '\t' .. ARGV[9])
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[8], 'overrides:' .. v)
return {1, v, exp}
)lua";

// KEYS: hash, version. ARGV: field, channel. Returns {removed, version}.
constexpr const char* remove_body = R"lua(
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return {0, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], 'overrides:' .. v)
return {1, v}
)lua";

// KEYS: hash, version. Returns {now, version, field, value, ...} of the live entries.
constexpr const char* list_body = R"lua(
local out = {string.format('%d', now), redis.call('GET', KEYS[2]) or '0'}
local live = redis.call('HGETALL', KEYS[1])
for i = 1, #live do out[#out + 1] = live[i] end
return out
)lua";

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return n;
}

std::string number(const std::optional<std::int64_t>& n) {
  return n ? std::to_string(*n) : std::string();
}

std::string field_of(const std::string& rule, bool prefix, const std::string& key) {
  return rule + '\t' + (prefix ? "prefix" : "exact") + '\t' + key;
}

// `n` tab-separated fields, the last one taking the rest (a key may hold tabs).
std::vector<std::string_view> split(std::string_view s, std::size_t n) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < n) {
    const auto tab = s.find('\t');
    if (tab == std::string_view::npos) break;
    out.push_back(s.substr(0, tab));
    s.remove_prefix(tab + 1);
  }
  out.push_back(s);
  return out;
}

std::optional<stored_override> parse_entry(std::string_view field, std::string_view value) {
  const auto f = split(field, 3);
  // The 7th, the rules version, may be absent (written before it was recorded).
  const auto v = split(value, 7);
  if (f.size() != 3 || v.size() < 6 || (f[1] != "exact" && f[1] != "prefix")) return std::nullopt;
  stored_override o;
  o.rule = f[0];
  o.prefix = f[1] == "prefix";
  o.key = f[2];
  if (!v[0].empty()) o.limit = to_int(v[0]);
  if (!v[1].empty()) o.window_ms = to_int(v[1]);
  if (!v[2].empty()) o.burst = to_int(v[2]);
  const auto exp = to_int(v[3]);
  const auto at = to_int(v[5]);
  if (!exp || !at) return std::nullopt;
  o.expires_at_ms = *exp;
  o.by = v[4];
  o.at_ms = *at;
  if (v.size() == 7) o.rules_version = to_int(v[6]).value_or(0);
  return o;
}

std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

overrides_store::overrides_store(rules_ref ref, std::chrono::milliseconds timeout)
    : ref_(std::move(ref)), caller_(ref_.url, timeout) {
  const rules_keys keys(ref_, caller_.key_prefix());
  const auto base = keys.head.substr(0, keys.head.size() - std::string_view("head").size());
  hash_ = base + "overrides";
  version_ = base + "overrides_version";
  channel_ = keys.channel;
}

override_change overrides_store::set(const stored_override& o, std::int64_t for_ms,
                                     const std::string& by) {
  override_change out;
  const auto script = std::string(prologue) + set_body;
  auto a = caller_.call(
      hash_,
      {"EVAL", script, "2", hash_, version_, field_of(o.rule, o.prefix, o.key), number(o.limit),
       number(o.window_ms), number(o.burst), std::to_string(for_ms), one_line(by),
       std::to_string(max_stored_overrides), channel_, std::to_string(o.rules_version)});
  if (!a.error.empty()) {
    out.error = with_script_command(a.error, script);
    return out;
  }
  const auto& e = a.value.elements;
  if (e.size() < 2 || e[0].kind != redis_value::type::integer) {
    out.error = a.node + ": the override script answered something else than {done, version}";
    return out;
  }
  out.done = e[0].integer == 1;
  if (!out.done) {
    out.refused = ref_.describe() + " holds " + std::to_string(e[1].integer) +
                  " run-time overrides, the most it takes (" +
                  std::to_string(max_stored_overrides) +
                  "): remove some or wait for them to expire";
    return out;
  }
  out.version = e[1].integer;
  if (e.size() > 2) out.expires_at_ms = e[2].integer;
  return out;
}

override_change overrides_store::remove(const std::string& rule, bool prefix,
                                        const std::string& key) {
  override_change out;
  const auto script = std::string(prologue) + remove_body;
  auto a = caller_.call(
      hash_, {"EVAL", script, "2", hash_, version_, field_of(rule, prefix, key), channel_});
  if (!a.error.empty()) {
    out.error = with_script_command(a.error, script);
    return out;
  }
  const auto& e = a.value.elements;
  if (e.size() != 2 || e[0].kind != redis_value::type::integer) {
    out.error = a.node + ": the override script answered something else than {done, version}";
    return out;
  }
  out.done = e[0].integer == 1;
  out.version = e[1].integer;
  return out;
}

overrides_list overrides_store::list() {
  overrides_list out;
  const auto script = std::string(prologue) + list_body;
  auto a = caller_.call(hash_, {"EVAL", script, "2", hash_, version_});
  if (!a.error.empty()) {
    out.error = with_script_command(a.error, script);
    return out;
  }
  const auto& e = a.value.elements;
  const auto now = e.size() >= 2 ? to_int(e[0].str) : std::nullopt;
  const auto version = e.size() >= 2 ? to_int(e[1].str) : std::nullopt;
  if (!now || !version || e.size() % 2 != 0) {
    out.error = a.node + ": the override list script answered something else than {now, ...}";
    return out;
  }
  out.redis_now_ms = *now;
  out.version = *version;
  for (std::size_t i = 2; i + 1 < e.size(); i += 2)
    if (auto o = parse_entry(e[i].str, e[i + 1].str)) out.entries.push_back(std::move(*o));
  std::sort(out.entries.begin(), out.entries.end(), [](const auto& x, const auto& y) {
    return std::tie(x.rule, x.prefix, x.key) < std::tie(y.rule, y.prefix, y.key);
  });
  return out;
}

std::optional<std::int64_t> overrides_store::version(std::string& error) {
  auto a = caller_.call(hash_, {"GET", version_});
  if (!a.error.empty()) {
    error = a.error;
    return std::nullopt;
  }
  if (a.value.kind == redis_value::type::nil) return 0;
  auto v = to_int(a.value.str);
  if (!v) error = a.node + ": " + version_ + " is not a number";
  return v;
}

std::optional<std::int64_t> overrides_announcement(const std::string& payload) {
  constexpr std::string_view tag = "overrides:";
  if (!payload.starts_with(tag)) return std::nullopt;
  return to_int(std::string_view(payload).substr(tag.size()));
}

}  // namespace floodgate::service
