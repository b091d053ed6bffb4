// Log lines are logfmt (key=value): one event per line, easy to grep and to ship.
//
//   spdlog::info("msg={} file={} rules={}", quote("config reloaded"), quote(path), n);
#pragma once

#include <string>
#include <string_view>

namespace floodgate::service {

// A logfmt value: double-quoted, with '"', '\' and control characters escaped.
inline std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : "?";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace floodgate::service
