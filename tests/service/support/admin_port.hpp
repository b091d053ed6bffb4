// For tests of floodgated's admin listener: its port, and waiting until the backend is ready.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {

// The port of the "admin listening" log line.
inline std::uint16_t admin_port_of(const floodgated_process& fg) {
  EXPECT_TRUE(fg.wait_for_log("msg=\"admin listening\""));
  const auto log = fg.log();
  const auto at = log.find("msg=\"admin listening\"");
  const auto p = log.find(" port=", at);
  return static_cast<std::uint16_t>(std::stoi(log.substr(p + 6)));
}

// The backend connects in the background: until /readyz says so, checks fail closed.
inline void wait_ready(const floodgated_process& fg) {
  using namespace std::chrono_literals;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(10ms))
    if (http_request_once(fg.port(), "GET", "/readyz").status == 200) return;
  FAIL() << "floodgated never became ready:\n" << fg.log();
}

}  // namespace floodgate::test
