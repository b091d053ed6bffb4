// One command at a time to the Redis node that holds a key, behind a backend URL, each answered
// within a deadline: for tools that keep a small state of their own beside floodgate's (the
// rules floodgated takes from Redis, service/rules/). Not the decision path.
//
//   floodgate::redis_caller c{"redis+cluster://127.0.0.1:7000", 500ms};
//   auto a = c.call("{rules:prod}:head", {"HGET", "{rules:prod}:head", "version"});
//   if (!a.error.empty()) report(a.error);   // "127.0.0.1:7000: no answer within 500 ms"
//   else use(a.value.str);
//
// The URL is read as make_backend reads it (TLS, credentials, key_prefix: key_prefix() says it;
// the caller names keys whole), and a command goes where the backend would send it: for
// redis:// and rediss:// the URL's node; for redis+cluster:// the key's slot master (the seeds
// in turn, a MOVED followed, an ASK once after ASKING, at most 5 redirections); for
// redis+sentinel:// the primary of the newest configuration the sentinels name, asked at each
// call (so a failover is followed at the next call).
//
// Blocking, on connections of its own (closed after any failure): each connect and each answer
// takes at most `timeout`. Not thread-safe, except stop(). Never throws once built.
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

  // `command` run on the node that holds `key` (every key it names must share key's slot).
  redis_answer call(std::string_view key, const std::vector<std::string>& command);

  // Any thread: the call in progress and every later one return at once ("stopped").
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate
