#include "rules/rules_store.hpp"

#include <pwd.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>

#include "rules/script_error.hpp"

namespace floodgate::service {
namespace {

// KEYS: head, versions, history. ARGV: text, base ("force" or a version), by, note, kept,
// channel. Returns {1, new version} or {0, the version in force} (the base was not it).
constexpr const char* push_script = R"lua(
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if ARGV[2] ~= 'force' and tonumber(ARGV[2]) ~= current then return {0, current} end
local v = current + 1
local t = redis.call('TIME')
local at = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], 'version', v, 'text', ARGV[1], 'by', ARGV[3], 'at_ms', at,
           'note', ARGV[4])
redis.call('HSET', KEYS[2], v, ARGV[1])
redis.call('LPUSH', KEYS[3], v .. '\t' .. at .. '\t' .. ARGV[3] .. '\t' .. ARGV[4])
local kept = tonumber(ARGV[5])
while redis.call('LLEN', KEYS[3]) > kept do
  local old = redis.call('RPOP', KEYS[3])
  redis.call('HDEL', KEYS[2], string.match(old, '^(%d+)'))
end
redis.call('PUBLISH', ARGV[6], v)
return {1, v}
)lua";

std::int64_t to_int(const std::string& s) {
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return ec == std::errc{} && end == s.data() + s.size() ? n : -1;
}

// One line of a push's author or note: tabs and line ends would break the history's fields.
std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

rules_store::rules_store(rules_ref ref, std::chrono::milliseconds timeout)
    : ref_(std::move(ref)), caller_(ref_.url, timeout), keys_(ref_, caller_.key_prefix()) {}

redis_answer rules_store::call(const std::vector<std::string>& command) {
  return caller_.call(keys_.head, command);
}

std::optional<std::int64_t> rules_store::version(std::string& error) {
  auto a = call({"HGET", keys_.head, "version"});
  if (!a.error.empty()) {
    error = a.error;
    return std::nullopt;
  }
  if (a.value.kind == redis_value::type::nil) return 0;
  const auto v = to_int(a.value.str);
  if (v < 0) {
    error = a.node + ": " + keys_.head + ": version is not a number";
    return std::nullopt;
  }
  return v;
}

std::optional<rules_version> rules_store::head(std::string& error) {
  auto a = call({"HMGET", keys_.head, "version", "text", "by", "at_ms", "note"});
  if (!a.error.empty()) {
    error = a.error;
    return std::nullopt;
  }
  rules_version out;
  const auto& e = a.value.elements;
  if (e.size() != 5 || e[0].kind == redis_value::type::nil) return out;
  out.version = to_int(e[0].str);
  if (out.version < 1) {
    error = a.node + ": " + keys_.head + ": version is not a number";
    return std::nullopt;
  }
  out.text = e[1].str;
  out.by = e[2].str;
  out.at_ms = to_int(e[3].str);
  out.note = e[4].str;
  return out;
}

std::optional<rules_version> rules_store::at(std::int64_t v, std::string& error) {
  auto text = call({"HGET", keys_.versions, std::to_string(v)});
  if (!text.error.empty()) {
    error = text.error;
    return std::nullopt;
  }
  if (text.value.kind == redis_value::type::nil) return std::nullopt;
  auto list = history(error);
  if (!list) return std::nullopt;
  rules_version out;
  for (auto& h : *list)
    if (h.version == v) out = std::move(h);
  out.version = v;
  out.text = std::move(text.value.str);
  return out;
}

std::optional<std::vector<rules_version>> rules_store::history(std::string& error) {
  auto a = call({"LRANGE", keys_.history, "0", std::to_string(rules_history_kept - 1)});
  if (!a.error.empty()) {
    error = a.error;
    return std::nullopt;
  }
  std::vector<rules_version> out;
  for (const auto& e : a.value.elements) {
    std::string_view s = e.str;
    std::string fields[4];
    for (int i = 0; i < 4; ++i) {
      const auto tab = i < 3 ? s.find('\t') : std::string_view::npos;
      fields[i] = std::string(s.substr(0, tab));
      s = tab == std::string_view::npos ? std::string_view{} : s.substr(tab + 1);
    }
    out.push_back({to_int(fields[0]), {}, fields[2], to_int(fields[1]), fields[3]});
  }
  return out;
}

push_result rules_store::push(const std::string& text, std::optional<std::int64_t> base,
                              const std::string& by, const std::string& note) {
  push_result out;
  auto a = call({"EVAL", push_script, "3", keys_.head, keys_.versions, keys_.history, text,
                 base ? std::to_string(*base) : "force", one_line(by), one_line(note),
                 std::to_string(rules_history_kept), keys_.channel});
  if (!a.error.empty()) {
    out.error = with_script_command(a.error, push_script);
    return out;
  }
  const auto& e = a.value.elements;
  if (e.size() != 2 || e[0].kind != redis_value::type::integer) {
    out.error = a.node + ": the push script answered something else than {done, version}";
    return out;
  }
  out.pushed = e[0].integer == 1;
  (out.pushed ? out.version : out.current) = e[1].integer;
  return out;
}

std::string rules_author() {
  const char* user = std::getenv("USER");
  if (!user || !*user) {
    const passwd* pw = ::getpwuid(::getuid());  // services and containers often have no $USER
    user = pw ? pw->pw_name : nullptr;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(user && *user ? user : "unknown") + "@" + (host[0] ? host : "unknown");
}

}  // namespace floodgate::service
