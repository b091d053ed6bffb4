// For tests of what reads a configuration file: reading a FIFO must be refused, not waited on
// (open() of a FIFO blocks until a writer comes; on SIGHUP that held floodgated's accept thread).
//
//   EXPECT_EQ(outcome_of_reading_fifo(fifo, [fifo] { load_config(fifo); }),
//             fifo + ": not a regular file (a FIFO)");
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

namespace floodgate::test {

// Runs `read` (which reads the FIFO at `fifo`) on a thread of its own. Returns the message of
// what it threw, "loaded" if it threw nothing, or "blocked" when it had not returned within
// `within` (a writer then comes and goes, so that the blocked open() returns and the thread
// ends). `within` is a ceiling: an open() and a throw take microseconds.
inline std::string outcome_of_reading_fifo(
    const std::string& fifo, std::function<void()> read,
    std::chrono::milliseconds within = std::chrono::seconds(5)) {
  auto answer = std::make_shared<std::promise<std::string>>();
  auto outcome = answer->get_future();
  std::thread([read = std::move(read), answer] {
    try {
      read();
      answer->set_value("loaded");
    } catch (const std::exception& e) {
      answer->set_value(e.what());
    }
  }).detach();
  if (outcome.wait_for(within) == std::future_status::ready) return outcome.get();
  const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (w >= 0) ::close(w);
  outcome.wait();
  return "blocked";
}

}  // namespace floodgate::test
