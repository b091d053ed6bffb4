// Many queued checks as one call of the batch script (lua/batch.lua), and its reply handed
// back to each check.
//
// Redis runs scripts on one thread, and a call costs it about as much again as the decision
// inside (EVALSHA, the script's set-up, TIME), so the checks that queue on a connection while
// earlier calls are in flight go out together: the per-call cost is paid once per batch. A
// check that finds the connection idle is sent at once, alone, so batching adds no latency.
//
//   EVALSHA <batch sha1> n key_1..key_n now_ms [alg limit window_ms burst cost count]...
//
// where each run of `count` consecutive items shares its algorithm, limit, window, burst and
// cost (checks of one policy usually queue together). Each item is built from the lone call
// its request carries (request::batch_part), so a check is encoded once whichever way it goes.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "redis/reply.hpp"
#include "redis/request.hpp"

namespace floodgate::redis {

// Whether batchable `r` may share one call with batchable `first`: one slot (Redis Cluster
// runs a call on one slot's node) and the same now_ms (a test clock's, or Redis's TIME).
bool can_share(const request& first, const request& r) noexcept;

// The encoded size of `r` as an item of a batch (its key and five arguments).
std::size_t batch_item_size(const request& r) noexcept;

// Appends one call of `batch` (the batch script, lua/batch.lua: the caller's, so a connection
// need not know it) deciding `items` (batchable, sharing by can_share), sent as `form`.
void append_batch(std::string& out, const script& batch, std::span<const request_ptr> items,
                  script_call form);

// Completes every item with its part of the batch's reply `r` (two integers when allowed,
// three when denied, or its own error: lua/batch.lua), read into its decision
// (request::complete_part); a reply that is an error as a whole (MOVED, BUSY, ...) goes to each
// item as it is, and one that does not parse fails the rest with errc::protocol_error. A null item
// (it timed out in flight) keeps its place and is skipped.
void complete_batch(std::span<request_ptr> items, reply& r) noexcept;

}  // namespace floodgate::redis
