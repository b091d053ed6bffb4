// Polls a condition until it holds or a limit passes: how tests wait for what happens in the
// background (a failover, a switch, a sentinel discovering the others).
#pragma once

#include <chrono>
#include <exception>
#include <thread>

namespace floodgate::test {

// Polls `done` every 2 ms until it says yes (true) or `limit` passes (false). A poll that
// throws counts as "not yet": a node changing role resets its connections (seen in CI as
// "Connection reset by peer" from ROLE during a Sentinel failover).
template <class F>
bool wait_for(F done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  const auto poll = [&] {
    try {
      return static_cast<bool>(done());
    } catch (const std::exception&) {
      return false;
    }
  };
  while (!poll()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace floodgate::test
