#include "redis/endpoint_label.hpp"

namespace floodgate::redis {

std::string endpoint_label(std::string_view host, std::uint16_t port) {
  // Only an IPv6 address holds a ':'; host names and IPv4 addresses never do.
  const bool v6 = host.find(':') != std::string_view::npos;
  std::string out;
  out.reserve(host.size() + 8);
  if (v6) out += '[';
  out += host;
  if (v6) out += ']';
  out += ':';
  out += std::to_string(port);
  return out;
}

std::string endpoint_label(const redis_endpoint& ep) {
  return endpoint_label(ep.host, ep.port);
}

}  // namespace floodgate::redis
