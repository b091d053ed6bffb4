#pragma once
// Numbers out of Redis's INFO text, for tests that count what Redis did.
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include "redis_server.hpp"

namespace floodgate::test {

// The number after `field:` on its own line of an INFO reply ("total_connections_received:7"),
// or after `field=` inside the line that starts with `line_prefix:` ("cmdstat_evalsha:calls=3,…").
inline std::optional<long long> info_number(std::string_view info, std::string_view field,
                                            std::string_view line_prefix = {}) {
  const std::string head = std::string(line_prefix.empty() ? field : line_prefix) + ":";
  while (!info.empty()) {
    const std::size_t eol = info.find('\n');
    std::string_view line = info.substr(0, eol);
    info = eol == std::string_view::npos ? std::string_view{} : info.substr(eol + 1);
    if (!line.starts_with(head)) continue;
    line.remove_prefix(head.size());
    if (!line_prefix.empty()) {  // "calls=3,usec=40,...": the value of `field=`
      const std::string key = std::string(field) + "=";
      std::size_t at = 0;
      while (at < line.size() && !line.substr(at).starts_with(key)) {
        at = line.find(',', at);
        if (at == std::string_view::npos) return std::nullopt;
        ++at;
      }
      if (at >= line.size()) return std::nullopt;
      line.remove_prefix(at + key.size());
    }
    long long n = 0;
    const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), n);
    if (ec != std::errc{} || p == line.data()) return std::nullopt;
    return n;
  }
  return std::nullopt;
}

// INFO commandstats's `field` for `command` (e.g. "evalsha", "calls"); 0 when Redis has not
// seen the command since the last CONFIG RESETSTAT.
inline long long command_stat(const redis_server& redis, std::string_view command,
                              std::string_view field = "calls") {
  const auto info = redis.command({"INFO", "commandstats"}).str;
  return info_number(info, field, "cmdstat_" + std::string(command)).value_or(0);
}

// Script calls Redis ran (or refused), however they were sent: FCALL, EVALSHA or EVAL.
inline long long script_calls(const redis_server& redis) {
  const auto info = redis.command({"INFO", "commandstats"}).str;
  long long n = 0;
  for (std::string_view c : {"fcall", "fcall_ro", "evalsha", "evalsha_ro", "eval", "eval_ro"})
    n += info_number(info, "calls", "cmdstat_" + std::string(c)).value_or(0);
  return n;
}

}  // namespace floodgate::test
