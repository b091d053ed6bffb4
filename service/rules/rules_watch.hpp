// floodgated --rules-from: keeps the rules in force equal to the newest valid version in Redis.
// A thread reads the version every `interval` (each read within the store's timeout) and, when it
// changed, the document, and hands it to `apply` — floodgated's reload path, which validates it
// as a file reload is and returns why it refused it (empty: in force). A refused version is
// logged once and the one in force stays; Redis failing is logged when its reason changes and
// the rules in force stay. state() says which version runs, the newest seen, and why they differ.
//
//   rules_watch w(store, first, [&](const rules_version& v) { return apply(v); });
//   w.poke();              // SIGHUP: read at the next wait's end (within an interval)
//   rules_state s = w.state();
//
// The thread waits on a subscription to the document's channel (every push PUBLISHes its
// version there), so a push applies in about a round trip; and reads the version anyway after
// each wait, every `subscribed_interval` at most (`interval` while the subscription is down,
// renewed at each wait), so a message lost to a dropped connection or a failover delays a
// version by that much, never for good. Destruction stops the thread (within one read's
// timeout) before returning.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "rules/rules_state.hpp"
#include "rules/rules_store.hpp"

namespace floodgate::service {

struct rules_watch_options {
  // Between version reads while not subscribed: a push applies within this plus two reads
  // (each within the store's timeout).
  std::chrono::milliseconds interval{200};
  // ... and while subscribed: a push's PUBLISH wakes the thread at once, so this only bounds
  // a message lost while the subscription was being renewed.
  std::chrono::milliseconds subscribed_interval{500};
};

class rules_watch {
 public:
  using apply_fn = std::function<std::string(const rules_version&)>;
  // `first`: the version applied at start-up (already in force). `store` is used by the
  // thread only from now on.
  rules_watch(rules_store& store, const rules_version& first, apply_fn apply,
              rules_watch_options options = {});
  ~rules_watch();
  rules_watch(const rules_watch&) = delete;
  rules_watch& operator=(const rules_watch&) = delete;

  void poke();  // any thread: read at the end of the current wait (within an interval)
  rules_state state() const;

 private:
  void run(const std::stop_token& stop);
  void check();

  rules_store& store_;
  redis_subscription changes_;  // the document's channel
  apply_fn apply_;
  rules_watch_options options_;
  mutable std::mutex mutex_;
  std::condition_variable_any wake_;
  bool poked_ = false;
  rules_state state_;
  std::jthread thread_;  // last: started once the members exist, stopped first
};

// Unix ms now, for rules_state.
std::int64_t unix_ms_now();

}  // namespace floodgate::service
