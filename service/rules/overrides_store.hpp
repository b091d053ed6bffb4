// Run-time per-key overrides in Redis, beside the rules document they override (rules_ref.hpp):
// a hash {rules:NAME}:overrides whose fields are "RULE\tKIND\tKEY" (KIND exact or prefix) and
// values "limit\twindow_ms\tburst\texpires_at\tby\tat_ms\trules_version" (an empty number:
// not set; rules_version may be absent), with the times in Redis's own clock (unix ms). Every
// change is one Lua script that also drops expired entries, bumps {rules:NAME}:overrides_version
// and PUBLISHes "overrides:VERSION" on the rules channel (a rules push publishes a bare number, so
// a watcher tells the two apart).
//
//   overrides_store s(parse_rules_ref("redis://127.0.0.1:6379#prod"), 1s);
//   auto r = s.set({.rule = "api", .key = "vip", .limit = 1000}, 3'600'000, "alice@host");
//   auto l = s.list();   // l.entries live now, l.redis_now_ms: Redis's clock at the read
//
// Bounded: at most max_stored_overrides entries (a set beyond it is refused, naming it).
// Blocking, each answer within `timeout`. Not thread-safe, except stop().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/redis_call.hpp"
#include "rules/rules_ref.hpp"

namespace floodgate::service {

// Entries one document may hold: each set scans them all (in its script), so this bounds a
// set's time in Redis as well as floodgated's table.
inline constexpr std::size_t max_stored_overrides = 10'000;

struct stored_override {
  std::string rule;
  bool prefix = false;  // false: `key` is one exact key
  std::string key;
  std::optional<std::int64_t> limit;
  std::optional<std::int64_t> window_ms;
  std::optional<std::int64_t> burst;
  std::int64_t expires_at_ms = 0;  // Redis's clock
  std::string by;                  // who set it ("user@host")
  std::int64_t at_ms = 0;          // when, Redis's clock
  // The rules version it was checked against when set (0: not recorded, or an Envoy rule's).
  std::int64_t rules_version = 0;
};

struct overrides_list {
  std::vector<stored_override> entries;  // live at redis_now_ms, by rule, kind, key
  std::int64_t redis_now_ms = 0;         // Redis's clock when read
  std::int64_t version = 0;              // of the overrides (0: never changed)
  std::string error;                     // Redis failed (the server's words); else empty
};

struct override_change {
  bool done = false;         // set: stored; remove: there was such an entry
  std::int64_t version = 0;  // the overrides version after it
  std::int64_t expires_at_ms = 0;
  std::string refused;  // set: why not (the bound), in words
  std::string error;    // Redis failed (the server's words)
};

class overrides_store {
 public:
  overrides_store(rules_ref ref, std::chrono::milliseconds timeout);

  const rules_ref& ref() const noexcept { return ref_; }
  const std::string& why_not() const noexcept { return caller_.why_not(); }
  const std::string& channel() const noexcept { return channel_; }

  // Adds or replaces the entry for (rule, prefix, key), expiring `for_ms` after Redis's now.
  override_change set(const stored_override& o, std::int64_t for_ms, const std::string& by);
  override_change remove(const std::string& rule, bool prefix, const std::string& key);
  overrides_list list();
  // The overrides version alone (0: never changed), or nullopt with `error`.
  std::optional<std::int64_t> version(std::string& error);

  void stop() { caller_.stop(); }

 private:
  rules_ref ref_;
  redis_caller caller_;
  std::string hash_, version_, channel_;
};

// The payload a change PUBLISHes ("overrides:7"), or nullopt for another (a rules version).
std::optional<std::int64_t> overrides_announcement(const std::string& payload);

}  // namespace floodgate::service
