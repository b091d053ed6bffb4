// The keys most often checked and most often denied, per rule, over a sliding interval: what
// GET /v1/top answers on the admin listener (--top-keys N enables it; off by default, keys are
// sensitive).
//
//   hot_keys top({.capacity = 64, .interval = 60s});
//   top.record("api", key, /*denied=*/true, steady_clock::now());      // per decided item
//   auto r = top.report("api", 10, steady_clock::now());
//
// Per rule, two space-saving sketches (space_saving.hpp) — checks and denials — in two
// generations: the current interval and the one before. A report merges both, so it covers
// the last `interval` to 2 × `interval` (span_ms says exactly). Counts are upper bounds that
// overestimate by at most the entry's `error`, and every error is at most N / capacity (N:
// checks, or denials, in the span); a key with more than N / capacity occurrences is always
// listed. Memory per rule: 4 × capacity entries of at most max_key_size bytes, fixed.
//
// Threading: any thread. A mutex per rule, held for one sketch update (a hash, a probe and
// O(log capacity) heap steps); the rule's entry is found under a shared lock, taken
// exclusively only for a rule's first record.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/space_saving.hpp"

namespace floodgate::service {

struct hot_keys_options {
  std::size_t capacity = 64;                  // counters per sketch (--top-keys)
  std::chrono::milliseconds interval{60000};  // one generation (--top-interval)
};

class hot_keys {
 public:
  using clock = std::chrono::steady_clock;

  explicit hot_keys(hot_keys_options options);
  ~hot_keys();

  void record(std::string_view rule, std::string_view key, bool denied, clock::time_point now);

  struct report_t {
    std::chrono::milliseconds span{0};  // what the counts cover: now - start of the older gen.
    std::uint64_t checks = 0;           // N of the checked list
    std::uint64_t denials = 0;          // N of the denied list
    std::vector<space_saving::entry> checked;  // by count, largest first
    std::vector<space_saving::entry> denied;
  };
  // The `n` hottest keys of `rule` (empty lists for a rule never recorded).
  report_t report(std::string_view rule, std::size_t n, clock::time_point now) const;

  const hot_keys_options& options() const noexcept { return options_; }

 private:
  struct per_rule;
  per_rule& of(std::string_view rule, clock::time_point now);

  hot_keys_options options_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<per_rule>, std::less<>> rules_;
};

}  // namespace floodgate::service
