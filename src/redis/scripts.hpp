// The Lua scripts, embedded at build time from lua/ (see cmake/embed_lua.cmake), with their
// SHA1 computed at build time too, so EVALSHA can be sent before any SCRIPT LOAD; and the same
// scripts as one function library, called by FCALL where the server lets us load it.
//
// Calling convention (docs/algorithms.md, "Redis representation"):
//   per-algorithm: KEYS[1] = state key; ARGV = {limit, window_ms, burst, cost, now_ms}
//   multi, batch:  KEYS[1..n];          ARGV = {now_ms, then per item: algorithm name,
//                                               limit, window_ms, burst, cost}
//   multi_block:   KEYS[1..2n] (state keys, then block keys); ARGV = {now_ms, then per item:
//                  algorithm name, limit, window_ms, burst, cost, block_for_ms}
//   now_ms is "" unless a test clock is set. The replies: script_decision.hpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "floodgate/policy.hpp"

namespace floodgate::redis {

struct script {
  std::string_view name;    // "gcra", ..., "multi"
  std::string_view source;  // the exact text sent with SCRIPT LOAD
  std::string_view sha1;    // 40 lowercase hex digits of source
  std::string_view function;  // its name in script_library(): FCALL <function> numkeys ...
};

// How a call of a script is sent: FCALL by the function's name (its helpers were defined
// once, when the library loaded), EVALSHA (the whole script runs, helpers and all, on every
// call), or EVAL with the source (after the script cache was flushed twice under the call).
// FCALL and EVALSHA take the same arguments after the name.
enum class script_call : std::uint8_t { fcall, evalsha, eval };

struct function_library {
  std::string_view name;    // "floodgate_" and 12 hex digits of a hash of every script
  std::string_view source;  // the exact text sent with FUNCTION LOAD
};

// What a pool's connections run, as the backend that encodes the calls chose it: the
// connections need not know which script is which.
struct script_set {
  std::vector<const script*> all;  // SCRIPT LOADed where the library is not (stream.hpp)
  // Decides many checks in one call (batch.hpp, lua/batch.lua): batchable calls queued
  // together go as one call of it. Null: every call goes alone.
  const script* batch = nullptr;
  // The same scripts as one library, loaded by the greeting and called by FCALL unless
  // redis_options::use_functions is false or the server refuses it. Null: EVALSHA.
  const function_library* library = nullptr;
};

const script& script_for(algorithm a) noexcept;
// All-or-nothing: every item decided against the state before the call, written only if all
// are allowed.
const script& multi_script() noexcept;
// Independent items decided in order, each written as it is allowed (lua/batch.lua); an
// item whose arguments are refused answers an error in its first element.
const script& batch_script() noexcept;
// Checks whose policies have a penalty (block_for): multi with a block key per item
// (lua/multi_block.lua); one item is a single check.
const script& multi_block_script() noexcept;
// Gives back a request's cost (lua/refund.lua): KEYS[1] = state key, ARGV = {algorithm,
// limit, window_ms, burst, cost, now_ms}; answers a peek's five integers after it.
const script& refund_script() noexcept;
// Concurrency limits (lua/acquire.lua, lua/release.lua): KEYS[1] = lease set;
// acquire ARGV = {limit, lease_ms, lease id, now_ms} → five integers of a decision;
// release ARGV = {lease id, lease_ms (0: release, else renew), now_ms} → 1 or 0.
const script& acquire_script() noexcept;
const script& release_script() noexcept;
// Takes up to `wanted` units of a key's quota at once (lua/reserve.lua, core/reserve.hpp):
// KEYS[1] = state key, ARGV = {algorithm, limit, window_ms, burst, wanted, now_ms} → granted,
// then the limit, remaining, reset_after and retry_after of the key after the grant.
const script& reserve_script() noexcept;
// Returns a reservation's unspent units to its window (lua/give_back.lua, core/give_back.hpp):
// KEYS[1] = state key, KEYS[2] = marker; ARGV = {algorithm, window_ms, window, units, now_ms}
// → units given back, replayed (0/1).
const script& give_back_script() noexcept;
// Every script above as one library of functions (script::function).
const function_library& script_library() noexcept;

}  // namespace floodgate::redis
