#include "redis_watch/redis_info.hpp"

#include <charconv>
#include <cstdlib>

namespace floodgate::service {
namespace {

constexpr std::string_view script_commands[] = {
    "fcall", "fcall_ro", "function|load", "evalsha", "eval", "evalsha_ro", "eval_ro",
    "script|load", "script"};

std::uint64_t to_u64(std::string_view v) {
  std::uint64_t n = 0;
  std::from_chars(v.data(), v.data() + v.size(), n);
  return n;
}

double to_double(std::string_view v) {
  // strtod needs a terminated string; the values are short.
  return std::strtod(std::string(v).c_str(), nullptr);
}

// "calls=5,usec=123,usec_per_call=24.60,..." → the field's value.
std::string_view field(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    const auto item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == name) return item.substr(eq + 1);
  }
  return {};
}

}  // namespace

std::optional<redis_info> parse_info(std::string_view text) {
  redis_info info;
  bool any_section = false;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("# ")) {
      any_section = true;
      continue;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto key = line.substr(0, colon);
    const auto value = line.substr(colon + 1);
    if (key == "used_cpu_sys")
      info.used_cpu_sys = to_double(value);
    else if (key == "used_cpu_user")
      info.used_cpu_user = to_double(value);
    else if (key == "used_memory")
      info.used_memory = to_u64(value);
    else if (key == "maxmemory")
      info.maxmemory = to_u64(value);
    else if (key == "evicted_keys")
      info.evicted_keys = to_u64(value);
    else if (key == "expired_keys")
      info.expired_keys = to_u64(value);
    else if (key.starts_with("cmdstat_")) {
      const auto name = key.substr(8);
      for (auto ours : script_commands)
        if (name == ours)
          info.commands.push_back(
              {std::string(name), to_u64(field(value, "calls")), to_u64(field(value, "usec"))});
    }
  }
  if (!any_section) return std::nullopt;
  return info;
}

}  // namespace floodgate::service
