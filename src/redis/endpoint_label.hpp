// How errors, logs and metrics name a Redis endpoint: "host:port", or "[v6]:port" for an IPv6
// address, so the port never reads as part of the address.
//
//   endpoint_label(ep)                  // "127.0.0.1:6379", "[::1]:6379"
//   endpoint_label("redis-1", 7000)     // "redis-1:7000"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "redis/url.hpp"

namespace floodgate::redis {

std::string endpoint_label(std::string_view host, std::uint16_t port);
std::string endpoint_label(const redis_endpoint& ep);

}  // namespace floodgate::redis
