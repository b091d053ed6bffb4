// Parses redis://[user:password@]host[:port][/db] (or rediss://, the same over TLS) into what
// a connection needs.
//
//   auto ep = floodgate::redis::parse_redis_url("redis://app:s3cret@127.0.0.1:6379/2");
//   // ep.host "127.0.0.1", ep.port 6379, ep.user "app", ep.password "s3cret", ep.db 2
//
// userinfo "user:password" authenticates as an ACL user (AUTH user password), ":password"
// with the password alone (AUTH password); both may be percent-encoded. The port defaults to
// 6379 and the database to 0. IPv6 hosts go in brackets: redis://[::1]:6379.
// Throws config_error naming the problem (with any password masked) for anything else.
//
// Errors, logs and metrics name an endpoint by endpoint_label(): "host:port", or "[v6]:port"
// for an IPv6 address, so the port never reads as part of the address.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::redis {

struct redis_endpoint {
  std::string host;
  std::uint16_t port = 6379;
  std::string user;                     // empty: AUTH with the password alone (if any)
  std::optional<std::string> password;  // none: no AUTH
  std::int64_t db = 0;                  // SELECT it when not 0
  bool tls = false;                     // rediss://: TLS, as redis_options::tls says

  friend bool operator==(const redis_endpoint&, const redis_endpoint&) = default;
};

redis_endpoint parse_redis_url(std::string_view url);

// "127.0.0.1:6379", "[::1]:6379", "redis-1:7000".
std::string endpoint_label(std::string_view host, std::uint16_t port);
std::string endpoint_label(const redis_endpoint& ep);

// `s` as a whole decimal number of type T; nullopt for anything else (empty, trailing bytes,
// out of T's range).
template <class T>
std::optional<T> parse_number(std::string_view s) noexcept {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Whether `s` starts with `prefix` (lower case), ignoring case: URL schemes.
bool iequals_prefix(std::string_view s, std::string_view prefix) noexcept;

// The URL with its password replaced by "***", for messages and logs.
std::string redact_url(std::string_view url);

}  // namespace floodgate::redis
