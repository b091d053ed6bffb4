// The run-time overrides read from Redis (overrides_store.hpp) as the run-time table takes them
// (config/runtime_overrides.hpp): what floodgated --rules-from applies, and what `floodgate
// inspect|reset --rules-from` and `floodgate override list` judge, the same way.
//
//   auto entries = runtime_entries(store.list(), unix_ms_now());
//   live.replace(lookup, std::move(entries), unix_ms_now());
#pragma once

#include <cstdint>
#include <vector>

#include "config/runtime_overrides.hpp"
#include "rules/overrides_store.hpp"

namespace floodgate::service {

// `o` read at Redis's `redis_now_ms`, with its expiry moved to the local clock at `now` by the
// time it has left: clock skew between hosts does not matter.
runtime_override runtime_entry(const stored_override& o, std::int64_t redis_now_ms,
                               std::int64_t now);
std::vector<runtime_override> runtime_entries(const overrides_list& l, std::int64_t now);

}  // namespace floodgate::service
