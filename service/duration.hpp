// Durations as written in the config file: an integer and a unit, "500ms", "60s", "5m", "1h".
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace floodgate::service {

// nullopt for anything else: no sign, no spaces, no fractions, no unit-less numbers (a bare
// "60" is ambiguous between seconds and milliseconds), nothing that overflows.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept;

}  // namespace floodgate::service
