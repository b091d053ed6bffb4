#include "config/percent_decode.hpp"

#include <cstdint>

namespace floodgate::service {

std::optional<std::string> percent_decode(std::string_view s, plus_sign plus) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+' && plus == plus_sign::space) {
      out += ' ';
    } else if (s[i] != '%') {
      out += s[i];
    } else {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

void percent_escape(std::string& out, std::string_view s, std::string_view specials) {
  static constexpr char hex[] = "0123456789ABCDEF";
  // The bytes to escape as a 256-bit set: two operations a byte (this makes every Envoy
  // counter key).
  std::uint64_t set[4] = {};
  const auto add = [&set](unsigned char b) { set[b >> 6] |= std::uint64_t{1} << (b & 63); };
  add('%');
  for (const char x : specials) add(static_cast<unsigned char>(x));
  const auto special = [&set](char c) {
    const auto b = static_cast<unsigned char>(c);
    return (set[b >> 6] >> (b & 63)) & 1;
  };
  // Runs of plain bytes are appended whole.
  std::size_t plain = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!special(s[i])) continue;
    const auto b = static_cast<unsigned char>(s[i]);
    const char escaped[3] = {'%', hex[b >> 4], hex[b & 15]};
    out.append(s.data() + plain, i - plain).append(escaped, 3);
    plain = i + 1;
  }
  out.append(s.data() + plain, s.size() - plain);
}

}  // namespace floodgate::service
