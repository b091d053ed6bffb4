// SHA-256 in hex (OpenSSL's, which rediss:// links already), for naming state keys that cannot
// be stored verbatim (see key.hpp). Not for secrets: it only has to spread keys and never
// collide in practice.
//
//   auto hex = floodgate::redis::sha256_hex("abc");   // "ba7816bf...15ad"
#pragma once

#include <string>
#include <string_view>

namespace floodgate::redis {

// 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace floodgate::redis
