#include "redis/sha256.hpp"

#include <openssl/sha.h>

namespace floodgate::redis {

std::string sha256_hex(std::string_view data) {
  static constexpr char digits[] = "0123456789abcdef";
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d);
  std::string out(2 * SHA256_DIGEST_LENGTH, '0');
  for (std::size_t i = 0; i < SHA256_DIGEST_LENGTH; ++i) {
    out[2 * i] = digits[d[i] >> 4];
    out[2 * i + 1] = digits[d[i] & 0xf];
  }
  return out;
}

}  // namespace floodgate::redis
