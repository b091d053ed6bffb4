// Redis's own view of itself, from the text of INFO: what floodgated samples for /metrics
// (redis_sampler.hpp). A parser only: fed the reply's bytes, no I/O.
//
//   if (auto info = parse_info(reply_text)) info->used_memory ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::service {

struct redis_info {
  double used_cpu_sys = 0;  // seconds of CPU Redis used, kernel and user
  double used_cpu_user = 0;
  std::uint64_t used_memory = 0;  // bytes
  std::uint64_t maxmemory = 0;    // bytes; 0: no limit
  std::uint64_t evicted_keys = 0;
  std::uint64_t expired_keys = 0;
  // Command stats of the commands floodgate's scripts run as (EVALSHA, EVAL, SCRIPT LOAD and
  // their _ro forms), named as Redis names them ("evalsha", "script|load"). Redis counts every
  // client's calls: another application's scripts on the same Redis are included.
  struct command {
    std::string name;
    std::uint64_t calls = 0;
    std::uint64_t usec = 0;  // CPU time Redis spent in them, microseconds
  };
  std::vector<command> commands;
};

// nullopt when `text` is not INFO output (no "# Server"/"# Memory" style sections at all).
std::optional<redis_info> parse_info(std::string_view text);

}  // namespace floodgate::service
