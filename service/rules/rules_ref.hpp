// Where a rules document lives in Redis: `REDIS-URL#NAME` (floodgated --rules-from, floodgate
// rules ... --to/URL), and the keys that hold it. Every key shares the hash tag {rules:NAME},
// so one Lua script can change them all on a Redis Cluster too.
//
//   const rules_ref r = parse_rules_ref("redis://127.0.0.1:6379#prod");  // throws config_error
//   r.url == "redis://127.0.0.1:6379", r.name == "prod"
//   rules_keys k(r, "floodgate:");  // k.head == "floodgate:rules:{prod}:head"
#pragma once

#include <string>
#include <string_view>

namespace floodgate::service {

struct rules_ref {
  std::string url;   // a Redis URL, as --redis takes it
  std::string name;  // letters, digits, _ - . (1 to 64)

  // "redis://127.0.0.1:6379#prod", any password in the URL masked: for logs and status.
  std::string describe() const;
};

// Throws config_error ("--rules-from: ...") when there is no '#', the name is empty, too long
// or holds other characters.
rules_ref parse_rules_ref(std::string_view text);

struct rules_keys {
  rules_keys(const rules_ref& r, std::string_view key_prefix);
  std::string head;      // hash: version, text, by, at_ms, note (the version in force)
  std::string versions;  // hash: version -> text, for the versions in history
  std::string history;   // list, newest first: "version\tat_ms\tby\tnote"
  std::string channel;   // PUBLISH'ed the new version by every push
};

// How many versions a push keeps (older ones leave the history and the versions hash).
inline constexpr int rules_history_kept = 20;

}  // namespace floodgate::service
