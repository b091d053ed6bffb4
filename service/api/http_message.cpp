#include "api/http_message.hpp"

#include <algorithm>

namespace floodgate::service {

bool same_header_name(std::string_view a, std::string_view b) noexcept {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&](char x, char y) { return lower(x) == lower(y); });
}

std::optional<std::string_view> find_header(const header_list& headers, std::string_view name) {
  for (const auto& [n, v] : headers)
    if (same_header_name(n, name)) return std::string_view(v);
  return std::nullopt;
}

bool repeated_header(const header_list& headers, std::string_view name) noexcept {
  bool seen = false;
  for (const auto& [n, v] : headers)
    if (same_header_name(n, name)) {
      if (seen) return true;
      seen = true;
    }
  return false;
}

}  // namespace floodgate::service
