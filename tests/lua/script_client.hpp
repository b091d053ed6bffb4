// What the Lua tests share: a pipelining hiredis connection to the fixture's redis-server,
// the scripts loaded on it, and the C++ step functions as the model the scripts must match.
//
//   redis_server server;
//   script_client redis{server.port()};          // loads every script, checks its SHA1
//                                                // (and the library: FLOODGATE_LUA_FCALL)
//   auto r = redis.run(redis.eval(algorithm::gcra, "k", {10, 1000, 10}, 1, now));
//   model_key m{algorithm::gcra};
//   auto expected = as_ints(m.decide(now, p, 1));
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/step.hpp"
#include "floodgate/policy.hpp"
#include "redis_server.hpp"

struct redisContext;

namespace floodgate::test {

// The five integers a script returns per item: allowed, limit, remaining, reset_after,
// retry_after (-1: never).
using ints5 = std::array<long long, 5>;

ints5 as_ints(const decision& d);
std::string to_string(const ints5& v);
// Test names for suites parameterized by algorithm.
std::string algorithm_name(const ::testing::TestParamInfo<algorithm>& info);
// The first five integers of an array reply at `offset` items, or nullopt if it is not one.
std::optional<ints5> ints_of(const reply& r, std::size_t item = 0);

class script_client {
 public:
  explicit script_client(std::uint16_t port);  // connects, SCRIPT LOADs every script
  ~script_client();
  script_client(const script_client&) = delete;
  script_client& operator=(const script_client&) = delete;

  // Pipelining: append any number of commands, then read their replies in order.
  // A lone check's reply (lua/single.lua: one integer, or two or three) is read as the backend
  // reads it (redis::lone_decision) and answered as the five integers of the other scripts;
  // read_raw() answers it as Redis sent it.
  void append(const std::vector<std::string>& args);
  reply read();
  reply read_raw();
  reply run(const std::vector<std::string>& args) {
    append(args);
    return read();
  }
  reply run_raw(const std::vector<std::string>& args) {
    append(args);
    return read_raw();
  }

  // EVALSHA of an algorithm's script; now = nullopt sends "" (Redis's TIME).
  static std::vector<std::string> eval(algorithm a, const std::string& key, const core::params& p,
                                       std::int64_t cost, std::optional<std::int64_t> now);
  // The same with every argument as given, for malformed requests.
  static std::vector<std::string> eval_raw(algorithm a, std::vector<std::string> keys,
                                           std::vector<std::string> argv);

  struct item {
    algorithm algo;
    std::string key;
    core::params p;
    std::int64_t cost;
  };
  static std::vector<std::string> eval_multi(const std::vector<item>& items,
                                             std::optional<std::int64_t> now);
  // multi_block: item i's block key is its key + ":bk"; block_for[i] its penalty (0: none).
  static std::vector<std::string> eval_multi_block(const std::vector<item>& items,
                                                   const std::vector<std::int64_t>& block_for,
                                                   std::optional<std::int64_t> now);
  static std::vector<std::string> eval_multi_raw(std::vector<std::string> keys,
                                                 std::vector<std::string> argv);

 private:
  redisContext* context_ = nullptr;
  // FLOODGATE_LUA_FCALL=1 (ctest runs every Lua test both ways): the library is loaded too,
  // and each EVALSHA of one of floodgate's scripts goes as FCALL of its function instead, so
  // every test here holds for the scripts as functions as well.
  bool fcall_ = false;
  // Per command appended and not yet read: the capacity a lone check's reply is read with.
  std::deque<std::optional<std::int64_t>> lone_capacity_;
};

// One key as the C++ step functions see it, plus what its last write told Redis.
// Whether lua/fixed_window.lua or lua/sliding_window.lua admits `cost` into `s` with INCRBY,
// which keeps the key's expiry (set by the window's first write, on Redis's clock) instead of
// writing a new one: the same window, a current count above 0 that keeps its number of
// digits, and a packed value an INCRBY can add to. False for the other algorithms.
bool adds_in_place(const core::any_state& s, std::int64_t now, const core::params& p,
                   std::int64_t cost);

// The PEXPIRE a script gives a state it writes with SET ... PX: core::expiry, but for gcra the
// end of the second its TAT lies in (lua/gcra.lua: then a write in the same second keeps it).
std::int64_t redis_expiry(const core::any_state& s, std::int64_t now, const core::params& p);
// Whether gcra's write of `after` over `before` keeps the key's expiry (INCRBY): both TATs lie
// in one second and both values are one integer (a x L + r below 2^53, not "<a>:<r>").
bool keeps_expiry(const core::any_state& before, const core::any_state& after,
                  const core::params& p);

struct model_key {
  explicit model_key(algorithm a) : state(core::empty_state(a)), empty(core::empty_state(a)) {}

  core::any_state state;
  core::any_state empty;
  bool written = false;
  std::int64_t written_at = 0;  // now of the last write
  std::int64_t expiry = 0;      // its PEXPIRE

  decision decide(std::int64_t now, const core::params& p, std::int64_t cost) const {
    return core::decide(state, now, p, cost);
  }
  // Applies an allowed request; returns the expiry to expect on the Redis key.
  std::int64_t commit(std::int64_t now, const core::params& p, std::int64_t cost) {
    const bool in_place = written && adds_in_place(state, now, p, cost);
    const core::any_state before = state;
    core::commit(state, now, p, cost);
    // INCRBY or SET ... KEEPTTL: the key keeps the expiry of the write before
    if (in_place || (written && keeps_expiry(before, state, p))) return expiry;
    written = true;
    written_at = now;
    expiry = redis_expiry(state, now, p);
    return expiry;
  }
  // True once the state has outlived its expiry: it must then decide like the empty state.
  bool expired(std::int64_t now) const { return written && now >= written_at + expiry; }
};

}  // namespace floodgate::test
