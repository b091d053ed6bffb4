// Durations as people write them in config files and URLs: an integer and a unit, "500ms",
// "60s", "5m", "1h". Used by floodgated's rules file and the Redis URL's options.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace floodgate {

// nullopt for anything else: no sign, no spaces, no fractions, no unit-less numbers (a bare
// "60" is ambiguous between seconds and milliseconds), nothing that overflows.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept;

}  // namespace floodgate
