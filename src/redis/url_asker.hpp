// Questions to the Redis behind a backend URL from a thread that waits for each answer: what
// the inspection API (inspector.cpp), redis_caller and redis_subscription are made of. The URL
// is read as make_backend reads it, and a key's commands go where the backend would send them
// (key_reader: the URL's node, a Cluster's slot master, the primary the sentinels name now).
//
//   url_asker u{"redis+cluster://127.0.0.1:7000", 1s};
//   std::string error;
//   if (!u.why_not().empty() || !u.find_nodes(error)) report(...);
//   url_asker::key_reader k{u};                       // one key's commands
//   auto type = k.run({"TYPE", key}, error);          // nullopt: error names the node
//
// A connection is kept per endpoint and kind — a stream (stream.hpp): TLS as the URL says, AUTH
// with a node's own credentials or the sentinel_* ones, SELECT of a node's db — and closed after
// any failure, so a late reply never answers the next question. Each connect and each answer
// within `timeout`. Not thread-safe, except stop(). No Asio in this header.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/reply.hpp"
#include "redis/topology.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

class url_asker {
 public:
  using command = std::vector<std::string>;
  enum class peer { node, sentinel };

  // A URL the backend would refuse, or that names no Redis, gives an asker whose why_not()
  // says so; it asks nothing.
  url_asker(std::string_view url, std::chrono::milliseconds timeout);
  ~url_asker();
  url_asker(const url_asker&) = delete;
  url_asker& operator=(const url_asker&) = delete;

  const std::string& why_not() const noexcept { return why_not_; }
  const redis_options& options() const noexcept { return options_; }

  // The nodes a key's commands start from, in nodes(): the URL's; through Sentinel the primary
  // the sentinels name now (the connection to one that is one no more is closed). False, with
  // `error`, when no sentinel names one: nodes() keeps the one named last (none before).
  bool find_nodes(std::string& error);
  const std::vector<redis_endpoint>& nodes() const noexcept { return target_.nodes; }

  // The replies to `commands`, written together to `ep` (connecting first), all due within the
  // timeout, connecting included; or none, with `error` naming the endpoint.
  std::vector<reply> ask_all(const redis_endpoint& ep, peer kind,
                             const std::vector<command>& commands, std::string& error);
  // Closes the connection to `ep` (a primary that is one no more); the next ask reopens it.
  void close(const redis_endpoint& ep, peer kind);
  // What ask_all() and a subscription (redis_subscription) are made of: writes `commands` (none:
  // only reads) to `ep`, connecting first if need be, then reads into `replies` until
  // `enough(replies)`, `until`, stop() or the connection closing: then why, naming `ep`.
  std::optional<std::string> exchange(const redis_endpoint& ep, peer kind,
                                      const std::vector<command>& commands,
                                      std::chrono::steady_clock::time_point until,
                                      const std::function<bool(const std::vector<reply>&)>& enough,
                                      std::vector<reply>& replies);

  // Any thread: the question in progress and every later one return at once ("stopped").
  void stop();
  bool stopped() const noexcept;

  // Where one key lives, kept across its commands: from nodes() as find_nodes() left them.
  class key_reader {
   public:
    explicit key_reader(url_asker& u) : asker_(u), seeds_(u.nodes()) {}

    // `c`'s reply from the node holding the key; nullopt with `error` set (the node named, the
    // server's words quoted) when there is none. A Cluster seed that does not answer gives way
    // to the next (until one has); MOVED moves there for good, ASK asks there once.
    std::optional<reply> run(const command& c, std::string& error);
    // The node that gave the last final reply (an error reply included).
    const std::string& node_name() const noexcept { return node_name_; }

   private:
    url_asker& asker_;
    std::vector<redis_endpoint> seeds_;  // the start nodes, then those MOVED named
    std::size_t node_ = 0;               // asked next
    std::optional<redis_endpoint> ask_node_;
    bool found_ = false;  // a node has answered: no more seed-hopping on failures
    std::string node_name_;
  };

 private:
  std::chrono::milliseconds timeout_;
  std::string why_not_;
  redis_options options_;       // the URL's: key_prefix, TLS files, the sentinels' credentials
  topology target_;             // through Sentinel, its nodes are the primary found last
  struct impl;                  // the connections
  std::unique_ptr<impl> impl_;  // when why_not_ is empty
};

}  // namespace floodgate::redis
