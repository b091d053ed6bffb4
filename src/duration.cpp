#include "floodgate/duration.hpp"

#include <charconv>
#include <cstdint>
#include <limits>

namespace floodgate {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) noexcept {
  std::int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first == last || *first < '0' || *first > '9') return std::nullopt;
  auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc{}) return std::nullopt;
  const std::string_view unit(end, static_cast<std::size_t>(last - end));
  std::int64_t scale = 0;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else
    return std::nullopt;
  if (value > std::numeric_limits<std::int64_t>::max() / scale) return std::nullopt;
  return std::chrono::milliseconds(value * scale);
}

}  // namespace floodgate
