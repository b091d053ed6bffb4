// floodgated --log-format json: each logfmt line as one JSON object with the same fields.
//
//   logfmt_to_json("2026-12-03T15:00:00.000+0000", "info", "msg=\"listening\" port=8080")
//   // {"ts":"2026-12-03T15:00:00.000+0000","level":"info","msg":"listening","port":8080}
//
// The log calls stay logfmt (log_format.hpp); this reads their text back, so both formats carry
// the same fields by construction. Quoted values become JSON strings (unescaped as quote()
// escapes them); bare ones JSON numbers or booleans when they are such, else strings. A token
// without '=' (none of ours) is kept under "text".
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace floodgate::service {

namespace detail {

inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?, or true/false: written as it is.
inline bool json_literal(std::string_view v) {
  if (v == "true" || v == "false") return true;
  std::size_t i = v.starts_with('-') ? 1 : 0;
  if (i == v.size()) return false;
  if (v[i] == '0') {
    ++i;
  } else {
    if (v[i] < '1' || v[i] > '9') return false;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
  }
  if (i < v.size() && v[i] == '.') {
    const auto digits = ++i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
    if (i == digits) return false;
  }
  return i == v.size();
}

}  // namespace detail

inline std::string logfmt_to_json(std::string_view ts, std::string_view level,
                                  std::string_view line) {
  std::string out = "{\"ts\":";
  detail::append_json_string(out, ts);
  out += ",\"level\":";
  detail::append_json_string(out, level);
  std::string text;
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '=') ++end;
    if (end == line.size() || line[end] == ' ') {  // a bare token
      if (!text.empty()) text += ' ';
      text.append(line.substr(i, end - i));
      i = end;
      continue;
    }
    out += ',';
    detail::append_json_string(out, line.substr(i, end - i));
    out += ':';
    i = end + 1;
    if (i < line.size() && line[i] == '"') {  // quote()'s escapes undone
      std::string value;
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          ++i;
          value += line[i] == 'n' ? '\n' : line[i] == 't' ? '\t' : line[i];
        } else {
          value += line[i];
        }
      }
      ++i;  // the closing quote
      detail::append_json_string(out, value);
    } else {
      std::size_t v_end = i;
      while (v_end < line.size() && line[v_end] != ' ') ++v_end;
      const auto value = line.substr(i, v_end - i);
      if (detail::json_literal(value))
        out.append(value);
      else
        detail::append_json_string(out, value);
      i = v_end;
    }
  }
  if (!text.empty()) {
    out += ",\"text\":";
    detail::append_json_string(out, text);
  }
  out += '}';
  return out;
}

}  // namespace floodgate::service
