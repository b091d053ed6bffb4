// floodgate/inspect.hpp's text helpers: printable bytes and the scripts' source. No I/O.
#include <cstdio>

#include "floodgate/inspect.hpp"
#include "redis/scripts.hpp"

namespace floodgate {

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string_view script_source(algorithm a) {
  return redis::script_for(a).source;
}

std::string_view script_library_source() {
  return redis::script_library().source;
}

}  // namespace floodgate
