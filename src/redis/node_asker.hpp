// Questions to Redis servers and sentinels from a thread that waits for the answers, each due
// within a deadline: the inspection API (inspector.cpp, floodgate/inspect.hpp: floodgate inspect,
// GET /v1/inspect and the metrics sampler). A
// connection is kept per endpoint and kind — a stream (stream.hpp): TLS as the endpoint says,
// AUTH with a node's own credentials or the sentinel_* ones, SELECT of a node's db — and
// closed after any failure, so a late reply never answers the next question.
//
//   node_asker a{options, make_tls_context(options.tls)};
//   std::string why;
//   auto replies = a.ask(node, node_asker::peer::node, {{"TYPE", k}, {"PTTL", k}}, 1s, why);
//   if (replies.empty()) report(why);   // "127.0.0.1:6379: no answer within 1000 ms"
//
// Not thread-safe, but stop() may come from any thread: the ask in progress and every later
// one return at once. Asio stays in node_asker.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/connection.hpp"
#include "redis/reply.hpp"
#include "redis/sentinel_client.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

class node_asker {
 public:
  enum class peer { node, sentinel };
  using command = std::vector<std::string>;

  // `options`: TLS files, the sentinels' credentials, max_reply_size. `tls`: the context for
  // TLS endpoints (its error is given for them when it could not be made).
  node_asker(const redis_options& options, tls_context_result tls);
  ~node_asker();
  node_asker(const node_asker&) = delete;
  node_asker& operator=(const node_asker&) = delete;

  // The replies to `commands`, written together to `ep` (connecting first), all due within
  // `timeout` from now, connecting included; or none, with `error` naming the endpoint. An
  // error reply is a reply: the caller reads the server's words.
  std::vector<reply> ask(const redis_endpoint& ep, peer kind, const std::vector<command>& commands,
                         std::chrono::milliseconds timeout, std::string& error);
  // Closes the connection to `ep` (a primary that is one no more); the next ask reopens it.
  void close(const redis_endpoint& ep, peer kind);
  // Any thread: the ask in progress and every later one return at once ("stopped").
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// The primary the sentinels of `cfg` name, for a one-off look-up: every sentinel is asked
// (SENTINEL MASTER for its config-epoch, then get-master-addr-by-name, in one write; the
// address alone where the first is refused) and the newest configuration wins
// (sentinel_answer.hpp: right after a failover a sentinel may still name the old primary).
// nullopt with `error` (each sentinel's reason) when none names one.
std::optional<redis_endpoint> primary_from_sentinels(node_asker& a, const sentinel_config& cfg,
                                                     std::chrono::milliseconds timeout,
                                                     std::string& error);

}  // namespace floodgate::redis
