// The rules document in Redis (rules_ref.hpp names its keys): read the version in force, a
// version's text, the history; push a new version. A push is one Lua script that refuses it
// unless its base is the version in force (compare-and-set; `force` skips the check), then
// stores text, author and time, keeps the last rules_history_kept versions, and PUBLISHes the
// new version on the channel. So two operators can never overwrite each other silently: the
// second push, based on the same version as the first, is refused and told the new version.
//
//   rules_store s(parse_rules_ref("redis://127.0.0.1:6379#prod"), 1s);
//   std::string error;
//   if (auto head = s.head(error)) use(head->version, head->text);   // version 0: none yet
//   auto r = s.push(text, 3, "alice@host", "");   // r.pushed, r.version, r.current, r.error
//
// Blocking, each Redis answer within `timeout` (redis_call.hpp). Not thread-safe, except stop().
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/redis_call.hpp"
#include "rules/rules_ref.hpp"

namespace floodgate::service {

struct rules_version {
  std::int64_t version = 0;  // 0: no document yet
  std::string text;          // the YAML (empty in history entries)
  std::string by;            // who pushed it ("user@host")
  std::int64_t at_ms = 0;    // when, by Redis's clock (unix ms)
  std::string note;          // "rollback to 3", or empty
};

struct push_result {
  bool pushed = false;
  std::int64_t version = 0;  // pushed: the new version
  std::int64_t current = 0;  // refused: the version in force, which the base was not
  std::string error;         // Redis failed (the server's words); empty when it answered
};

class rules_store {
 public:
  rules_store(rules_ref ref, std::chrono::milliseconds timeout);

  const rules_ref& ref() const noexcept { return ref_; }
  // Empty when the URL is one the backend takes; otherwise why not.
  const std::string& why_not() const noexcept { return caller_.why_not(); }
  // The channel every push PUBLISHes its new version on.
  const std::string& channel() const noexcept { return keys_.channel; }

  // The version in force (0: none), or nullopt with `error`.
  std::optional<std::int64_t> version(std::string& error);
  // The version in force with its text (version 0: none), or nullopt with `error`.
  std::optional<rules_version> head(std::string& error);
  // Version `v`'s text, or nullopt: `error` empty when it is not (or no longer) in the history.
  std::optional<rules_version> at(std::int64_t v, std::string& error);
  // Newest first, texts empty; or nullopt with `error`.
  std::optional<std::vector<rules_version>> history(std::string& error);
  // `base`: the version the text was made from (0: the first push); nullopt: forced.
  push_result push(const std::string& text, std::optional<std::int64_t> base, const std::string& by,
                   const std::string& note);

  void stop() { caller_.stop(); }

 private:
  redis_answer call(const std::vector<std::string>& command);

  rules_ref ref_;
  redis_caller caller_;
  rules_keys keys_;
};

// "user@host" of this process, for a push's `by`.
std::string rules_author();

}  // namespace floodgate::service
