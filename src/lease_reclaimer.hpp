// Releases the leases of acquires whose outcome is unknown (docs/algorithms.md, "Concurrency
// limits"): an acquire that failed with a backend error (a timeout, a connection lost
// mid-call) may still have run in Redis and taken a slot under an id nobody was given. Only
// the semaphore knows that id, so it hands it here and the reclaimer releases it in the
// background: at once, then with backoff while the backend does not answer, until the
// backend answers. A lease granted to a caller gone before it took it (semaphore::give_back)
// is handed here the same way: its release answers true at once.
//
//   lease_reclaimer r{backend};   // one per semaphore
//   r.add(key, policy, id);       // the acquire of `id` failed with a backend error
//
// When it stops chasing an id:
// - a release answers true: the acquire had run, its slot is free again (`reclaimed`);
// - a release answers false at least `settle` after the failure: the id holds nothing. A
//   false answered sooner is not trusted: the failed acquire may still be on its way (a
//   dropped connection's bytes read after a later release's), so the id is tried again then;
// - the lease would have ended by itself (failure + lease + settle), or the table is full and
//   it is the oldest (`abandoned`): its slot comes back at the lease's end, as before.
//
// Threading: add() and stats() from any thread. Releases are sent from a thread of the
// reclaimer's own, started at the first add() and joined by the destructor, which stops the
// chase (ids still pending are left to their lease's end). Release answers may arrive after
// that, on a backend thread: they touch only state the reclaimer shares with them. The
// backend must outlive the reclaimer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/semaphore.hpp"

namespace floodgate::detail {

struct reclaimer_options {
  // A release's "not held" this soon after the failed acquire may have overtaken it.
  std::chrono::milliseconds settle{1000};
  // Retries of an unanswered release: the first after this, doubling up to max_backoff.
  std::chrono::milliseconds min_backoff{50};
  std::chrono::milliseconds max_backoff{2000};
  // Ids chased at once, at most; at the bound the one whose lease ends first is abandoned.
  std::size_t max_pending = 4096;
};

class lease_reclaimer {
 public:
  explicit lease_reclaimer(lease_backend& leases, reclaimer_options options = {});
  ~lease_reclaimer();
  lease_reclaimer(const lease_reclaimer&) = delete;
  lease_reclaimer& operator=(const lease_reclaimer&) = delete;

  // The acquire of `id` on (key, p) failed with a backend error, or was granted to nobody:
  // release it.
  void add(std::string_view key, const concurrency_policy& p, std::string_view id);

  semaphore_stats stats() const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace floodgate::detail
