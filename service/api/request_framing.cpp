#include "api/request_framing.hpp"

#include "api/render.hpp"
#include "config/ip_address.hpp"

namespace floodgate::service {

namespace {

bool hex_digit(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool unreserved_or_sub_delim(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("-._~!$&'()*+,;=").find(c) != std::string_view::npos;
}

// reg-name: *( unreserved / pct-encoded / sub-delims )
bool reg_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || !hex_digit(s[i + 1]) || !hex_digit(s[i + 2])) return false;
      i += 2;
    } else if (!unreserved_or_sub_delim(s[i])) {
      return false;
    }
  }
  return true;
}

// Inside the brackets: IPv6address, or IPvFuture ("v" 1*HEXDIG "." 1*( unreserved /
// sub-delims / ":" )).
bool ip_literal(std::string_view s) noexcept {
  if (!s.empty() && (s.front() == 'v' || s.front() == 'V')) {
    const auto dot = s.find('.');
    if (dot == std::string_view::npos || dot < 2 || dot + 1 == s.size()) return false;
    for (std::size_t i = 1; i < dot; ++i)
      if (!hex_digit(s[i])) return false;
    for (std::size_t i = dot + 1; i < s.size(); ++i)
      if (s[i] != ':' && !unreserved_or_sub_delim(s[i])) return false;
    return true;
  }
  // parse_ip takes IPv4 too: an IP-literal holds IPv6 only.
  return s.find(':') != std::string_view::npos && parse_ip(s).has_value();
}

}  // namespace

bool valid_host(std::string_view value) noexcept {
  std::string_view host = value;
  std::string_view port;
  if (value.starts_with('[')) {
    const auto close = value.find(']');
    if (close == std::string_view::npos || !ip_literal(value.substr(1, close - 1))) return false;
    const auto rest = value.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    if (!rest.empty()) port = rest.substr(1);
  } else {
    // A reg-name holds no ':', so the first one starts the port.
    const auto colon = value.find(':');
    if (colon != std::string_view::npos) {
      host = value.substr(0, colon);
      port = value.substr(colon + 1);
    }
    if (!reg_name(host)) return false;
  }
  if (port.size() > 5) return false;
  unsigned n = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  return n <= 65535;
}

std::optional<http_response> check_framing(
    unsigned version, const std::vector<std::string_view>& hosts,
    const std::vector<std::string_view>& transfer_encodings) {
  if (hosts.size() > 1) return error_response(400, "more than one Host header");
  if (version >= 11 && hosts.empty())
    return error_response(400, "an HTTP/1.1 request needs a Host header");
  if (!hosts.empty() && !valid_host(hosts.front()))
    return error_response(400,
                          "the Host header is not a host (a name, an IPv4 address or an IPv6 "
                          "address in brackets, then optionally ':' and a port)");

  // The codings, in the order applied; each without parameters, lower-cased.
  std::size_t codings = 0;
  std::size_t chunked_at = 0;  // 1-based position of the last "chunked", 0 if none
  bool other = false;
  for (auto value : transfer_encodings) {
    while (!value.empty()) {
      const auto comma = value.find(',');
      auto coding = value.substr(0, value.find_first_of(",;"));
      value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
      while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t'))
        coding.remove_prefix(1);
      while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
        coding.remove_suffix(1);
      if (coding.empty()) continue;
      ++codings;
      if (same_header_name(coding, "chunked")) {
        if (chunked_at != 0)
          return error_response(400, "Transfer-Encoding applies chunked more than once");
        chunked_at = codings;
      } else {
        other = true;
      }
    }
  }
  if (codings == 0) {
    if (!transfer_encodings.empty()) return error_response(400, "empty Transfer-Encoding");
    return std::nullopt;
  }
  if (chunked_at != codings)
    return error_response(400,
                          "Transfer-Encoding must end with chunked (the body's length is "
                          "unknown otherwise)");
  if (other) return error_response(501, "unsupported Transfer-Encoding: only chunked is decoded");
  return std::nullopt;
}

refused_version reread_version(std::string_view head) {
  const auto end = head.find("\r\n");
  if (end == std::string_view::npos) return {};
  const auto line = head.substr(0, end);
  const auto space = line.rfind(' ');
  if (space == std::string_view::npos) return {};
  const auto v = line.substr(space + 1);
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (v.size() != 8 || !v.starts_with("HTTP/") || !digit(v[5]) || v[6] != '.' || !digit(v[7]))
    return {};
  if (v[5] != '1') return {refused_version::verdict::not_supported, 0};
  if (v[7] < '2') return {};  // 1.0 and 1.1 were not refused for their version
  return {refused_version::verdict::serve_as_1_1, space + 1 + 7};
}

std::optional<absolute_target> from_absolute_form(std::string_view target) {
  std::string_view rest;
  for (std::string_view scheme : {"http://", "https://"})
    if (target.size() > scheme.size() && same_header_name(target.substr(0, scheme.size()), scheme))
      rest = target.substr(scheme.size());
  if (rest.empty()) return std::nullopt;
  const auto end = rest.find_first_of("/?#");
  absolute_target out;
  out.authority = rest.substr(0, end);
  if (out.authority.empty()) return std::nullopt;
  const auto path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (!path.starts_with('/')) out.target = "/";
  out.target.append(path);
  return out;
}

}  // namespace floodgate::service
