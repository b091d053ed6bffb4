// floodgated --envoy-env: envoyproxy/ratelimit's environment variables as floodgated's flags.
// The whole mapping is the table in envoy_env.cpp (docs/envoy.md shows it as a table too).
//
//   auto env = read_envoy_env([](const char* n) { return std::getenv(n); });
//   // env.flags: {{"--listen", "0.0.0.0:8080"}, {"--grpc-listen", "0.0.0.0:8081"}, ...}
//
// Every upstream setting that is set (non-empty) either maps to a flag, is accepted because
// floodgated already behaves so (e.g. NEAR_LIMIT_RATIO=0.8), or is refused: envoy_env_error
// names it and says why. Unset settings take upstream's defaults where floodgated needs a value
// (listeners on 0.0.0.0:8080 and 0.0.0.0:8081, RUNTIME_ROOT=/srv/runtime_data/current).
// Flags on the command line win: the environment's flag is left out when the command line
// gives it.
#pragma once

#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace floodgate::service {

struct envoy_env_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One flag and its value ("" for a flag without one), in the order main should parse them.
using env_flag = std::pair<std::string, std::string>;

struct envoy_env {
  std::vector<env_flag> flags;
  // Settings taken because floodgated already behaves so, each with what it does: logged.
  std::vector<std::string> notes;
};

// `getenv` returns nullptr for an unset variable; `given` holds the flags the command line
// gives ("--redis"), which the environment's do not replace. Throws envoy_env_error.
envoy_env read_envoy_env(const std::function<const char*(const char*)>& getenv,
                         const std::set<std::string, std::less<>>& given);

}  // namespace floodgate::service
