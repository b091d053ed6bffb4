#pragma once
// Values out of a Prometheus text exposition, for tests that check what /metrics counted.
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::test {

// The value of the sample whose name and labels are exactly `series` as printed
// (`floodgate_decisions_total{rule="open",result="degraded"}`), or nullopt when that
// series is absent: a renamed metric fails the test instead of matching nothing.
inline std::optional<double> metric_value(std::string_view text, std::string_view series) {
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (!line.starts_with(series) || line.size() <= series.size() || line[series.size()] != ' ')
      continue;
    line.remove_prefix(series.size() + 1);
    double v = 0;
    const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc{} || p != line.data() + line.size()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace floodgate::test
