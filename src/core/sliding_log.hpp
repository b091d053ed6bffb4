// sliding_log: the exact log of admissions, one entry per millisecond that admitted something
// (docs/algorithms.md). Same three functions as fixed_window.hpp.
#pragma once

#include <cstdint>
#include <deque>

#include "core/params.hpp"

namespace floodgate::core {

struct sliding_log_entry {
  std::int64_t time;   // when (admissions of one millisecond share an entry)
  std::int64_t total;  // cost admitted by the log up to and including this entry
};

struct sliding_log_state {
  std::deque<sliding_log_entry> entries;  // times ascending, totals increasing
  std::int64_t base = 0;                  // the total before the first entry
};

decision decide(const sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost);
void commit(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost);
// As commit, but the cost counts from `at` >= now, until at + W (a reservation spent until
// `at`: core/reserve.hpp). Entries that aged out by `now` are dropped, no more.
void commit_at(sliding_log_state& s, std::int64_t now, const params& p, std::int64_t cost,
               std::int64_t at);
std::int64_t expiry(const sliding_log_state& s, std::int64_t now, const params& p);

}  // namespace floodgate::core
