// One command at a time to the Redis node that holds a key, behind a backend URL, each answered
// within a deadline: for tools that keep a small state of their own beside floodgate's (the
// rules floodgated takes from Redis, service/rules/). Not the decision path.
//
//   floodgate::redis_caller c{"redis+cluster://127.0.0.1:7000", 500ms};
//   auto a = c.call("{rules:prod}:head", {"HGET", "{rules:prod}:head", "version"});
//   if (!a.error.empty()) report(a.error);   // "127.0.0.1:7000: no answer within 500 ms"
//   else use(a.value.str);
//
// The URL is read, and a command goes where the backend would send it, as redis_inspector's
// questions (floodgate/inspect.hpp); key_prefix() says the URL's prefix: the caller names keys
// whole. Blocking, on connections of its own (closed after any failure): each connect and each
// answer takes at most `timeout`. Not thread-safe, except stop(). Never throws once built.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate {

// A reply as Redis sent it (RESP2).
struct redis_value {
  enum class type : std::uint8_t { nil, string, status, error, integer, array };
  type kind = type::nil;
  std::int64_t integer = 0;           // integer
  std::string str;                    // string, status, error
  std::vector<redis_value> elements;  // array

  bool is_error() const noexcept { return kind == type::error; }
  // An error reply's first word: "MOVED", "NOPERM", ...
  std::string_view error_code() const noexcept {
    const std::string_view s = str;
    return s.substr(0, s.find(' '));
  }
};

struct redis_answer {
  redis_value value;  // when error is empty
  std::string error;  // no answer, or an error reply: the node named, the server's words quoted
  std::string node;   // host:port that answered (set when one did)
};

class redis_caller {
 public:
  // A URL that names no Redis, or one the backend refuses, gives a caller whose every answer
  // says so (why_not()).
  explicit redis_caller(std::string_view url,
                        std::chrono::milliseconds timeout = std::chrono::seconds(1));
  ~redis_caller();
  redis_caller(const redis_caller&) = delete;
  redis_caller& operator=(const redis_caller&) = delete;

  // Empty when the URL names a Redis the backend would take; otherwise why not.
  const std::string& why_not() const noexcept;
  // The URL's key_prefix ("floodgate:" unless the URL says otherwise).
  const std::string& key_prefix() const noexcept;

  // `command` run on the node that holds `key` (every key it names must share key's slot),
  // found again at each call (a Cluster's by MOVED, the Sentinel's primary asked again), so a
  // failover is followed at the next call.
  redis_answer call(std::string_view key, const std::vector<std::string>& command);

  // Any thread: the call in progress and every later one return at once ("stopped").
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// A SUBSCRIBE to one channel behind a URL, read by the thread that waits on it: for learning
// at once of a change that a PUBLISH announces (a poll must stay beside it: a message sent
// while the subscription was down is lost).
//
//   floodgate::redis_subscription sub{url, "floodgate:rules:{prod}:changed", 1s};
//   for (;;) {
//     auto got = sub.wait(200ms);     // returns at the first message, or after 200 ms
//     if (!got.error.empty()) log(got.error);   // reconnects at the next wait
//     poll_anyway();
//   }
//
// Where: redis:// the URL's node; redis+cluster:// the first seed that answers (a PUBLISH
// reaches every node of a Cluster); redis+sentinel:// the primary the sentinels name, asked at
// each (re)connection. Not thread-safe, except stop(). Never throws once built.
class redis_subscription {
 public:
  // `timeout`: connecting, the greeting and the subscription's confirmation, together.
  redis_subscription(std::string_view url, std::string channel,
                     std::chrono::milliseconds timeout = std::chrono::seconds(1));
  ~redis_subscription();
  redis_subscription(const redis_subscription&) = delete;
  redis_subscription& operator=(const redis_subscription&) = delete;

  struct messages {
    std::vector<std::string> payloads;  // in order of arrival
    std::string error;                  // the subscription failed (the node named); none now
  };
  // (Re)subscribes when not subscribed, then waits up to `for_at_most` for a message; returns
  // at the first one (with any that came with it).
  messages wait(std::chrono::milliseconds for_at_most);
  bool subscribed() const noexcept;

  // Any thread: the wait in progress and every later one return at once.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate
