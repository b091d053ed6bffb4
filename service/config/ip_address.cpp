#include "config/ip_address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace floodgate::service {

std::optional<ip_address> parse_ip(std::string_view text) {
  // inet_pton wants a NUL-terminated string; the longest valid text is 45 characters.
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof buf || text.find('\0') != std::string_view::npos)
    return std::nullopt;
  std::copy(text.begin(), text.end(), buf);
  buf[text.size()] = '\0';
  ip_address a;
  if (::inet_pton(AF_INET, buf, a.bytes_.data()) == 1) {
    a.family_ = ip_address::family::v4;
    return a;
  }
  if (::inet_pton(AF_INET6, buf, a.bytes_.data()) != 1) return std::nullopt;
  a.family_ = ip_address::family::v6;
  constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(std::begin(mapped), std::end(mapped), a.bytes_.begin())) {
    std::copy(a.bytes_.begin() + 12, a.bytes_.end(), a.bytes_.begin());
    std::fill(a.bytes_.begin() + 4, a.bytes_.end(), std::uint8_t{0});
    a.family_ = ip_address::family::v4;
  }
  return a;
}

std::string ip_address::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  const int af = family_ == family::v4 ? AF_INET : AF_INET6;
  if (!::inet_ntop(af, bytes_.data(), buf, sizeof buf)) return {};
  return buf;
}

bool cidr::contains(const ip_address& a) const noexcept {
  if (a.kind() != network.kind()) return false;
  const auto& x = a.bytes();
  const auto& n = network.bytes();
  const unsigned whole = prefix / 8;
  if (!std::equal(n.begin(), n.begin() + whole, x.begin())) return false;
  const unsigned rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (x[whole] & mask) == n[whole];
}

std::string cidr::to_string() const {
  return network.to_string() + "/" + std::to_string(prefix);
}

std::optional<cidr> parse_cidr(std::string_view text) {
  const auto slash = text.find('/');
  auto address = parse_ip(text.substr(0, slash));
  if (!address) return std::nullopt;
  cidr out{*address, address->bits()};
  if (slash == std::string_view::npos) return out;
  const auto digits = text.substr(slash + 1);
  const char* end = digits.data() + digits.size();
  // The width as written: an IPv4-mapped network ("::ffff:10.0.0.0/104") came back as IPv4, and
  // its prefix shrinks with it.
  const unsigned written_bits =
      text.substr(0, slash).find(':') != std::string_view::npos ? 128 : 32;
  auto [p, ec] = std::from_chars(digits.data(), end, out.prefix);
  if (digits.empty() || ec != std::errc{} || p != end || out.prefix > written_bits)
    return std::nullopt;
  if (written_bits != address->bits()) {
    if (out.prefix < 96) return std::nullopt;
    out.prefix -= 96;
  }
  // Bits past the prefix must be zero.
  const auto& b = address->bytes();
  for (unsigned bit = out.prefix; bit < address->bits(); ++bit)
    if (b[bit / 8] & (0x80 >> (bit % 8))) return std::nullopt;
  return out;
}

}  // namespace floodgate::service
