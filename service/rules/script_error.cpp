#include "rules/script_error.hpp"

#include <charconv>

namespace floodgate::service {

std::string with_script_command(std::string error, std::string_view script) {
  constexpr std::string_view marker = "@user_script:";
  const auto at = error.rfind(marker);
  if (at == std::string::npos) return error;
  const char* first = error.data() + at + marker.size();
  int line = 0;
  const auto [end, ec] = std::from_chars(first, error.data() + error.size(), line);
  if (ec != std::errc{} || line < 1) return error;
  // The line's text: Redis counts from 1, as the script was sent.
  std::size_t start = 0;
  for (int n = 1; n < line; ++n) {
    start = script.find('\n', start);
    if (start == std::string_view::npos) return error;
    ++start;
  }
  const auto text = script.substr(start, script.find('\n', start) - start);
  constexpr std::string_view call = "redis.call('";
  const auto c = text.find(call);
  if (c == std::string_view::npos) return error;
  const auto name =
      text.substr(c + call.size(), text.find('\'', c + call.size()) - c - call.size());
  return error + " (line " + std::to_string(line) + ": " + std::string(name) + ")";
}

}  // namespace floodgate::service
