// Durations as people write them in config files and URLs: an integer and a unit, "500ms",
// "60s", "5m", "1h". The Redis URL's options are read with it, and so are floodgated's rules
// file and flags: a tool on the library reads a duration the way the library does.
//
//   auto window = floodgate::parse_duration("60s");   // 60000 ms; "60" or "1.5s": nullopt
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace floodgate {

// nullopt for anything else: no sign, no spaces, no fractions, no unit-less numbers (a bare
// "60" is ambiguous between seconds and milliseconds), nothing that overflows.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept;

}  // namespace floodgate
