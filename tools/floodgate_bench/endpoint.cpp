#include "endpoint.hpp"

#include <charconv>

namespace floodgate::bench {

std::optional<endpoint> parse_endpoint(std::string_view url, std::string_view scheme) {
  const std::string prefix = std::string(scheme) + "://";
  if (url.substr(0, prefix.size()) != prefix) return std::nullopt;
  url.remove_prefix(prefix.size());

  endpoint e;
  std::string_view path;
  if (auto slash = url.find('/'); slash != std::string_view::npos) {
    path = url.substr(slash + 1);
    url = url.substr(0, slash);
  }
  if (auto at = url.rfind('@'); at != std::string_view::npos) {
    const auto credentials = url.substr(0, at);
    url.remove_prefix(at + 1);
    const auto colon = credentials.find(':');
    e.user = std::string(credentials.substr(0, colon));
    if (colon != std::string_view::npos) e.password = std::string(credentials.substr(colon + 1));
  }
  const auto colon = url.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  auto host = url.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return std::nullopt;  // an IPv6 address needs its brackets
  }
  e.host = std::string(host);
  const auto port = url.substr(colon + 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
  if (ec != std::errc{} || end != port.data() + port.size() || e.port == 0) return std::nullopt;
  if (scheme == "redis" && !path.empty()) {
    auto [dend, dec] = std::from_chars(path.data(), path.data() + path.size(), e.db);
    if (dec != std::errc{} || dend != path.data() + path.size() || e.db < 0) return std::nullopt;
  }
  return e;
}

std::string endpoint::label() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace floodgate::bench
