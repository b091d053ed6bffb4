#include "redis/url.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "floodgate/errors.hpp"

namespace floodgate::redis {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; nullopt for a malformed escape.
std::optional<std::string> decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const int hi = i + 1 < s.size() ? hex_value(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

bool is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

}  // namespace

bool iequals_prefix(std::string_view s, std::string_view prefix) noexcept {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

std::string redact_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  const std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::size_t query = std::min(url.find('?'), url.size());
  // The userinfo: the parsers take it up to the last '@' (a user name may hold one), and the
  // password from its first ':': masked from there to that '@'.
  const std::string_view head = url.substr(0, query);
  std::string out(head);
  const auto at = head.rfind('@');
  if (at != std::string_view::npos && at >= start) {
    const auto colon = head.find(':', start);
    if (colon != std::string_view::npos && colon < at)
      out = std::string(head.substr(0, colon + 1)) + "***" + std::string(head.substr(at));
  }
  // The query string: a password option (sentinel_password=...) up to the next '&' or the end.
  // Only here: "password=" inside the userinfo is a password's own text, masked above.
  std::string rest(url.substr(query));
  constexpr std::string_view secret = "password=";
  for (auto p = rest.find(secret); p != std::string::npos; p = rest.find(secret, p + 1)) {
    const auto value = p + secret.size();
    const auto end = std::min(rest.find('&', value), rest.size());
    rest.replace(value, end - value, "***");
  }
  return out + rest;
}

redis_endpoint parse_redis_url(std::string_view url) {
  auto fail = [&](const std::string& why) -> redis_endpoint {
    throw config_error("redis URL '" + redact_url(url) + "': " + why);
  };
  const bool tls = iequals_prefix(url, "rediss://");
  if (!tls && !iequals_prefix(url, "redis://"))
    return fail("expected redis://[user:password@]host[:port][/db] (or rediss:// for TLS)");
  std::string_view rest = url.substr(tls ? 9 : 8);
  if (rest.find_first_of("?#") != std::string_view::npos)
    return fail("query strings and fragments are not supported");

  redis_endpoint ep;
  ep.tls = tls;
  // userinfo: everything before the last '@' (passwords may contain '@' when encoded as %40,
  // but an unencoded one still has to end at the last '@' before the host).
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string_view::npos)
      return fail("userinfo must be 'user:password' or ':password'");
    auto user = decode(userinfo.substr(0, colon));
    auto password = decode(userinfo.substr(colon + 1));
    if (!user || !password) return fail("malformed %-escape in userinfo");
    ep.user = std::move(*user);
    ep.password = std::move(*password);
  }

  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);

  std::optional<std::string_view> port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return fail("unterminated '[' in IPv6 host");
    ep.host = std::string(authority.substr(1, close - 1));
    const auto after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return fail("expected ':port' after ']'");
    if (!after.empty()) port_text = after.substr(1);
    if (ep.host.empty() ||
        ep.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos)
      return fail("malformed IPv6 host");
  } else {
    const auto colon = authority.find(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
    if (ep.host.empty()) return fail("missing host");
    for (char c : ep.host)
      if (!is_host_char(c)) return fail("invalid character in host '" + ep.host + "'");
  }
  if (port_text) {
    const auto port = parse_number<std::uint32_t>(*port_text);
    if (!port || *port == 0 || *port > 65535)
      return fail("port must be a number from 1 to 65535, got '" + std::string(*port_text) + "'");
    ep.port = static_cast<std::uint16_t>(*port);
  }
  if (!path.empty()) {
    const auto db = parse_number<std::int64_t>(path);
    if (!db || *db < 0 || *db > 0x7fffffff)
      return fail("database must be a non-negative number, got '" + std::string(path) + "'");
    ep.db = *db;
  }
  return ep;
}

std::string endpoint_label(std::string_view host, std::uint16_t port) {
  // Only an IPv6 address holds a ':'; host names and IPv4 addresses never do.
  const std::string h(host);
  return (host.find(':') != std::string_view::npos ? "[" + h + "]:" : h + ":") +
         std::to_string(port);
}

std::string endpoint_label(const redis_endpoint& ep) {
  return endpoint_label(ep.host, ep.port);
}

}  // namespace floodgate::redis
