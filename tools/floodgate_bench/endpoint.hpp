// host:port out of the URLs the naive and HTTP targets connect to by themselves:
// redis://[user:password@]host:port[/db] and http://host:port[/]; an IPv6 host in brackets
// ([::1]:6379), as URLs write it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::bench {

struct endpoint {
  std::string host;  // without brackets: what getaddrinfo takes
  std::uint16_t port = 0;
  std::string user, password;  // redis:// only; empty when absent
  int db = 0;                  // redis:// only

  // "host:port", an IPv6 host in brackets: for messages and the HTTP Host header.
  std::string label() const;
};

// std::nullopt when the URL does not have this shape or the scheme differs.
std::optional<endpoint> parse_endpoint(std::string_view url, std::string_view scheme);

}  // namespace floodgate::bench
