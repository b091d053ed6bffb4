// floodgated --rules-from: keeps its run-time override table equal to the entries in Redis
// (overrides_store.hpp). Loads them once when built, then a thread waits on the rules channel
// (a change PUBLISHes "overrides:VERSION" there) and reads the overrides version after each
// wait, every `subscribed_interval` at most (`interval` while the subscription is down), as
// rules_watch does for the rules; when it changed (or resync() asked), it reads every live entry
// and hands the list to `apply`. Redis failing is logged when its reason changes; the table
// keeps what it has (each entry still ends at its expiry, which the table checks at lookup).
//
//   overrides_watch w(store, [&](const overrides_list& l) { sync(table, l); });
//   w.resync();   // after a rules reload: read every entry again within an interval
//
// Destruction stops the thread (within one read's timeout) before returning.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "rules/overrides_store.hpp"

namespace floodgate::service {

struct overrides_watch_options {
  std::chrono::milliseconds interval{200};             // between reads, not subscribed
  std::chrono::milliseconds subscribed_interval{500};  // ... and subscribed
};

class overrides_watch {
 public:
  using apply_fn = std::function<void(const overrides_list&)>;
  // Reads the entries once before returning (a failure is logged, the thread retries).
  overrides_watch(overrides_store& store, apply_fn apply, overrides_watch_options options = {});
  ~overrides_watch();
  overrides_watch(const overrides_watch&) = delete;
  overrides_watch& operator=(const overrides_watch&) = delete;

  void resync();  // any thread: read every entry at the end of the current wait
  std::int64_t version() const;

 private:
  void run(const std::stop_token& stop);
  void check(bool force);

  overrides_store& store_;
  redis_subscription changes_;
  apply_fn apply_;
  overrides_watch_options options_;
  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  bool resync_ = false;
  std::int64_t version_ = -1;  // applied; -1: never read
  std::string error_;          // the last read's failure, as logged
  std::jthread thread_;        // last
};

}  // namespace floodgate::service
