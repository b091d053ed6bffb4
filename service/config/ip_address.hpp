// IP addresses and CIDR ranges as the service compares them: client keys and trusted proxies.
// Pure (inet_pton/inet_ntop), no Asio, so config and handler stay socket-free.
//
//   auto a = parse_ip("::ffff:192.0.2.7");   // an IPv4-mapped IPv6 address is its IPv4 address
//   a->to_string();                          // "192.0.2.7": one canonical text per address
//   auto net = parse_cidr("10.0.0.0/8");     // a bare address is a /32 (or /128)
//   net->contains(*parse_ip("10.1.2.3"));    // true
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::service {

class ip_address {
 public:
  enum class family { v4, v6 };

  family kind() const noexcept { return family_; }
  // 4 bytes for v4 (the rest zero), 16 for v6, network order.
  const std::array<std::uint8_t, 16>& bytes() const noexcept { return bytes_; }
  unsigned bits() const noexcept { return family_ == family::v4 ? 32 : 128; }

  // The canonical text (inet_ntop's: lower case, "::" compression).
  std::string to_string() const;

  friend bool operator==(const ip_address&, const ip_address&) = default;

 private:
  friend std::optional<ip_address> parse_ip(std::string_view text);
  family family_ = family::v4;
  std::array<std::uint8_t, 16> bytes_{};
};

// A literal IPv4 or IPv6 address, nothing else: no port, no brackets, no zone ("%eth0"), no
// surrounding space. IPv4-mapped IPv6 (::ffff:a.b.c.d) comes back as IPv4, so a dual-stack
// listener's peers compare equal to the same client seen over IPv4.
std::optional<ip_address> parse_ip(std::string_view text);

struct cidr {
  ip_address network;  // with the bits past `prefix` zero
  unsigned prefix = 0;

  bool contains(const ip_address& a) const noexcept;
  std::string to_string() const;  // "10.0.0.0/8"
};

// "ADDRESS/PREFIX" or a bare address (the whole width). nullopt if malformed, if the prefix is
// longer than the address, or if bits past the prefix are set ("10.0.0.1/8": a typo for
// 10.0.0.0/8 or for 10.0.0.1/32? refuse rather than guess).
std::optional<cidr> parse_cidr(std::string_view text);

}  // namespace floodgate::service
