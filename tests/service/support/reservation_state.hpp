// What a process's reservations left in Redis and on /metrics, for the tests of reservations
// across reloads (reservation_reload_test.cpp, reservation_envoy_reload_test.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <utility>
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

// The tests' rules reserve for 10 minutes in a day-long window. Near a window's end a grant is
// sized down to what is spent before the end (src/reservations.cpp), so "a grant holds units
// unspent" would not hold in the last minutes of a UTC day: `text` gets the first of these
// windows with half an hour left (windows are aligned to the epoch, and TIME on the loopback
// redis-server reads this clock). Two of them end together once in 575 days, three never.
inline std::string with_a_window_far_from_its_end(std::string text) {
  using namespace std::chrono;
  struct choice {
    hours window;
    const char* rules;  // a rules file's window
    const char* envoy;  // an Envoy config's unit of the same length (month: 30 days)
  };
  // Chosen once per process, so that a test's reloads keep the window its start had.
  static const auto chosen = [] {
    const auto now = duration_cast<minutes>(system_clock::now().time_since_epoch());
    const auto far = [now](hours w) { return w - now % w >= minutes(30); };
    const std::initializer_list<choice> choices = {
        {hours(24), "24h", "day"},
        {hours(25), "25h", nullptr},
        {hours(24 * 30), nullptr, "month"},
        {hours(23), "23h", nullptr},
        {hours(24 * 365), nullptr, "year"}};
    std::pair<std::string, std::string> c{"24h", "day"};
    for (const auto& w : choices)
      if (w.rules && far(w.window)) {
        c.first = w.rules;
        break;
      }
    for (const auto& w : choices)
      if (w.envoy && far(w.window)) {
        c.second = w.envoy;
        break;
      }
    return c;
  }();
  const auto replace = [&text](const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  };
  replace("window: 24h", "window: " + chosen.first);
  replace("unit: day", "unit: " + chosen.second);
  return text;
}

inline std::string units_given_back_of(const std::string& rule) {
  return "floodgate_rule_reserved_units_given_back_total{rule=\"" + rule + "\"}";
}

}  // namespace floodgate::test
