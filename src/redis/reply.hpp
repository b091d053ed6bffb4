// One parsed RESP2 reply, as a small tree. Produced by resp_reader, consumed by the client
// and the backend; owns its data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::redis {

struct reply {
  enum class type : std::uint8_t { nil, string, status, error, integer, array };

  type kind = type::nil;
  std::int64_t integer = 0;     // integer
  std::string str;              // string, status, error
  std::vector<reply> elements;  // array

  bool is_error() const noexcept { return kind == type::error; }
  // The error's code: the first word of an error reply ("NOSCRIPT", "BUSY", "ERR").
  std::string_view error_code() const noexcept {
    std::string_view s = str;
    return s.substr(0, s.find(' '));
  }
};

}  // namespace floodgate::redis
