// Units of a key's quota this process reserved in the backend (policy::reserve), spent here
// without a backend call (docs/algorithms.md, "Reservations").
//
// A reservation is recorded in the backend as one admitted request of its size, so spending it
// admits nothing the backend did not count: for fixed_window, no more than the limit per
// window whatever the number of processes. A reservation is spent for at most reserve_for and
// never past the window it was taken in (the reserve step answers when that window ends,
// counted here from before the call was sent, so it errs early). Units left unspent when a
// grant ends early (superseded by the next one, the policy reloaded, the limiter destroyed) are
// given back to the window the grant named, once (an id per grant); the bound does not depend
// on it (a crashed process gives nothing back: its units come back at the window's end). The
// price is under-admission, kept small by sizing: a reservation asks for what
// this process spent of the last one (doubling while they run out early; token_bucket, gcra
// and sliding_log, whose units cannot be given back: a third of what this process was asked
// for in the last span a grant may be spent in, and only more than the request), at most
// policy::reserve and at most half of what the key had left at the last grant; when that is
// less than the request, or a reservation is already being taken, the check goes to the
// backend as usual.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "floodgate/backend.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::detail {

class reservations : public std::enable_shared_from_this<reservations> {
 public:
  // `steady_ms` reads a monotonic clock in ms; `max_entries` bounds the keys remembered.
  reservations(std::shared_ptr<backend> b, std::function<std::int64_t()> steady_ms,
               std::size_t max_entries);
  // Gives back what this process holds (the limiter is gone), waiting for the answers at most
  // give_back_wait: the backend's own deadlines bound them, but this may run on a backend
  // thread, whose calls cannot complete while it waits.
  ~reservations();
  static constexpr std::int64_t give_back_wait_ms = 1000;

  // Answers (key, p, cost) from a reservation, or takes one and answers from it, and returns
  // true; returns false, touching nothing, when the check should go to the backend as usual.
  // `p.reserve()` > 0 and 1 <= cost <= p.capacity(). The answer is a check_result given to
  // `handler` as `shape(r)` (check_all's shape for a one-item check_all): spending allocates
  // nothing, and `handler` is moved from only when a reservation is taken.
  template <class Result, class Shape>
  bool check(std::string_view key, const policy& p, std::int64_t cost,
             std::function<void(Result)>& handler, Shape shape) {
    plan next = plan_check(key, p, cost);
    switch (next.step) {
      case plan::backend:
        return false;
      case plan::spent:
        handler(shape(std::move(next.answer)));
        return true;
      case plan::take:
        break;
    }
    if constexpr (std::is_same_v<Result, check_result>) {
      take(key, p, cost, next, std::move(handler));
    } else {
      take(key, p, cost, next,
           [handler = std::move(handler), shape](check_result r) { handler(shape(std::move(r))); });
    }
    return true;
  }

  // check_all of several items (valid, no duplicates), all-or-nothing: when every item whose
  // policy reserves holds its cost here, those costs are set aside, the other items (if any)
  // go to the backend in one call, and the set-aside units are spent if it admits them all and
  // returned to their grants if not; answers and returns true. Otherwise sets nothing aside,
  // starts a reservation for the reserving items that held too few (for later calls), and
  // returns false: the call goes to the backend as without reservations.
  bool check_all(std::span<const check_item> items,
                 std::function<void(multi_check_result)>& handler);

  // The backend answered `d` to a check of (key, p) that did not go through a reservation: for
  // token_bucket, gcra and sliding_log, the next grant is sized from d.remaining and none is
  // taken within a window of a denial (windowed algorithms ignore it: their figure ends with
  // their grant, and their units can be given back).
  void observe(std::string_view key, const policy& p, const decision& d);

  // Forgets this process's reservation of (key, p) (a reset: its units are no longer counted).
  void forget(std::string_view key, const policy& p);

  // Gives back and drops what is held under policies not in `rules` (a reload removed or
  // changed them: no later check of theirs would give it back). Returns the grants dropped.
  std::size_t keep_only(std::span<const policy> rules);

  // Summed over the shards (each locked in turn): for stats, not for the decision path.
  std::uint64_t taken() const;
  std::uint64_t units() const;
  std::uint64_t spent() const;
  std::uint64_t given_back() const noexcept { return given_back_->load(std::memory_order_relaxed); }
  // The same per rule (policy name), sorted by name; at most max_rules names, the rest counted
  // under other_rules.
  std::vector<rule_reservation_stats> by_rule() const;
  static constexpr std::size_t max_rules = 1024;
  static constexpr std::string_view other_rules = "(other)";

 private:
  // One rule's counters in one shard, counted under the shard's lock (a spent decision costs
  // no atomic operation); given_back is counted by give-backs' answers, off any lock, and is
  // the rule's across shards.
  using given_back_ptr = std::shared_ptr<std::atomic<std::uint64_t>>;
  struct rule_counters {
    std::uint64_t taken = 0, units = 0, spent = 0;
    given_back_ptr given_back;
  };
  // One of rule_counters' fields, summed over every shard and rule.
  std::uint64_t sum(std::uint64_t rule_counters::*field) const;
  struct shard;
  // With s locked: p's counters in s (at most max_rules names, then other_rules'). Takes the
  // process-wide rules_mutex_ only the first time s sees a rule.
  rule_counters* counters_for(shard& s, const policy& p);

  struct entry {
    policy rule;                  // a reload that changes the policy starts afresh
    rule_counters* counters;      // the rule's in this entry's shard (never null)
    std::int64_t left = 0;        // units reserved and not spent
    std::int64_t until = 0;       // steady ms: spend before this
    std::int64_t window_end = 0;  // steady ms: the end of the grant's window, or earlier
    std::int64_t reset_at = 0;    // steady ms: the key's reset_after at the grant
    std::int64_t key_left = -1;   // what the key had left at the last answer; -1: unknown
    // steady ms: when the key was last seen at its limit (token_bucket, gcra, sliding_log)
    std::int64_t denied_at = std::numeric_limits<std::int64_t>::min() / 2;
    std::int64_t next_size = 1;   // what the next reservation asks for (windowed algorithms)
    // token_bucket, gcra, sliding_log: the units this process was asked for in the last two
    // spans of `life` ms (a grant's spend time, min(reserve_for, spend span)), aligned to it:
    // the current one (`recent_at`) and the one before.
    std::int64_t life = 0, recent_at = 0, recent = 0, before = 0;
    std::int64_t granted = 0;     // the last grant
    std::int64_t window = 0;      // the last grant's window, as the backend numbers it
    std::uint64_t grant_id = 0;   // the last grant's number in this process (its give-back id)
    bool taking = false;          // a reservation is being taken
  };
  // Units of a grant to give back, taken out of its entry under the shard's lock and sent
  // after it.
  struct unspent {
    std::string key;
    policy rule;
    std::int64_t window = 0, units = 0;
    std::uint64_t grant_id = 0;
    std::string suffix;  // of the id: units set back after their grant gave back the rest
    given_back_ptr given;  // the rule's
  };
  struct shard {
    std::mutex mutex;
    std::unordered_map<std::string, entry> entries;
    // Rule name -> its counters here (stable: never erased). At most max_rules + 1 names.
    std::unordered_map<std::string, std::unique_ptr<rule_counters>> rules;
    std::uint64_t spent = 0;  // checks answered from units held here
  };

  // What a check does next: ask the backend, nothing more (backend); answered from units held
  // (spent: `answer`); or take a reservation of `wanted` (take).
  struct plan {
    enum { backend, spent, take } step = backend;
    check_result answer;
    std::string name;
    std::int64_t wanted = 0, sent = 0;
  };
  plan plan_check(std::string_view key, const policy& p, std::int64_t cost);
  void take(std::string_view key, const policy& p, std::int64_t cost, plan& next,
            std::function<void(check_result)> handler);

  // Units set aside by check_all for one item, until its batch is decided.
  struct held {
    std::string name;
    policy rule;
    std::uint64_t grant_id = 0;
    std::int64_t window = 0, window_end = 0, cost = 0;
    rule_counters* counters;  // in name's shard (its given_back is the rule's)
  };
  // Puts them back into their grant, or gives them back if the grant was replaced meanwhile.
  void release(std::vector<held>& units);

  static std::string name_of(std::string_view key, const policy& p);
  shard& shard_of(const std::string& name);
  static check_result admitted(const entry& e, const policy& p, std::int64_t now);
  // With the shard locked: what `e` holds and may give back (none once its window ended, by
  // this process's early estimate). The caller then replaces e's units or drops e.
  static void take_unspent(const std::string& name, const entry& e, std::int64_t now,
                           std::vector<unspent>& out);
  // Sends them; `done` (may be empty) runs once per answer.
  void give_back(std::vector<unspent>& units, const std::function<void()>& done);
  void granted(const std::string& name, const policy& p, std::int64_t cost, std::int64_t sent,
               const reserve_reply& r, std::function<void(check_result)> handler);

  std::shared_ptr<backend> backend_;
  std::function<std::int64_t()> steady_ms_;
  std::size_t max_per_shard_;
  mutable std::vector<shard> shards_;
  std::string id_prefix_;  // random per process: give-back ids are unique across processes
  std::atomic<std::uint64_t> grant_ids_{0}, release_ids_{0};
  std::atomic<std::uint64_t> batches_spent_{0};  // check_all batches answered from units held
  // Rule names counted apart (at most max_rules, then other_rules) and their given_back.
  mutable std::mutex rules_mutex_;
  std::unordered_map<std::string, given_back_ptr> rules_;
  // Shared with give-backs' handlers: the last ones are answered after this is gone.
  std::shared_ptr<std::atomic<std::uint64_t>> given_back_ =
      std::make_shared<std::atomic<std::uint64_t>>(0);
};

}  // namespace floodgate::detail
