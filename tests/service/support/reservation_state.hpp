// What a process's reservations left in Redis and on /metrics, for the tests of reservations
// across reloads (reservation_reload_test.cpp, reservation_envoy_reload_test.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "http_client.hpp"
#include "metrics_text.hpp"
#include "redis_server.hpp"

namespace floodgate::test {

// The count a fixed_window key holds in Redis (docs/algorithms.md, "Redis representation":
// pack(window index, count)); 0 when the key is missing.
inline std::int64_t fixed_window_count(const redis_server& redis, const std::string& key) {
  const auto r = redis.command({"GET", key});
  if (r.kind == reply::nil) return 0;
  if (r.kind != reply::string || r.str.empty())
    throw std::runtime_error("not a fixed_window state: " + key + " = " + r.str);
  const std::size_t digits = static_cast<unsigned char>(r.str.back()) - '0';
  if (digits == 0) return 0;
  if (digits + 1 > r.str.size()) throw std::runtime_error("bad packed state: " + r.str);
  return std::stoll(r.str.substr(r.str.size() - 1 - digits, digits));
}

// A counter on `port`'s /metrics (`series` with its labels), 0 when absent.
inline double counter_on(std::uint16_t port, const std::string& series) {
  return metric_value(http_request_once(port, "GET", "/metrics").body, series).value_or(0);
}

inline std::string units_given_back_of(const std::string& rule) {
  return "floodgate_rule_reserved_units_given_back_total{rule=\"" + rule + "\"}";
}

}  // namespace floodgate::test
