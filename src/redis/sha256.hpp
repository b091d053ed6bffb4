// SHA-256 (FIPS 180-4), for naming state keys that cannot be stored verbatim (see key.hpp).
// Not for secrets: it only has to spread keys and never collide in practice.
//
//   auto hex = floodgate::redis::sha256_hex("abc");   // "ba7816bf...15ad"
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::redis {

using sha256_digest = std::array<std::uint8_t, 32>;

sha256_digest sha256(std::string_view data) noexcept;

// 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace floodgate::redis
