// A client for one Redis server: a few connections, pipelined, driven by one background
// thread (the server is a node of a node pool, node_pool.hpp, as each of a Cluster's is). Requests
// from any thread are queued to the least loaded ready connection; each connection coalesces
// everything queued into one write and matches replies in order.
//
//   auto c = make_client(parse_redis_url(url), options, {{&script_for(algorithm::gcra)}});
//   auto r = std::make_unique<my_request>(...);   // command, deadline, complete()
//   c->submit(std::move(r));                      // completes exactly once, on c's thread
//
// What it guarantees:
// - Every request completes exactly once: with the reply, an error reply mapped to an errc,
//   errc::timeout at its deadline, errc::not_connected when no connection can take it or its
//   connection is lost, or errc::shutting_down when the client is destroyed first.
// - A connection on which a request timed out in flight is dropped, never reused, so a late
//   reply can never be taken for the next request's. Requests not yet written move on.
// - EVALSHA that meets NOSCRIPT (the script did not run) is retried after SCRIPT LOAD on the
//   same connection, invisibly to the caller. Every connection loads the scripts' library when
//   it connects, after AUTH and SELECT (the scripts themselves only where the library is
//   refused or turned off), and FCALL that meets a missing function goes again as EVALSHA.
// - Lost connections are re-established at once, then with capped, jittered exponential
//   backoff while attempts fail; while every connection is backing off, requests fail fast
//   with not_connected instead of waiting for their deadlines.
// - A circuit breaker (breaker.hpp): after breaker_failures calls in a row got no answer,
//   calls fail at once with not_connected for breaker_open_for, then one probe goes through.
// - last_error() tells the latest problem with the node's address and the server's words;
//   healthy() is false while none is ready, the breaker is open, or a call failed for a
//   lasting reason (NOPERM), until a call is answered again.
//
// Threading: submit() and healthy() may be called from any thread. Completions run on the
// client's thread (or inline in submit() once shutting down), never under its locks, and
// must not block. The destructor completes whatever is pending with shutting_down and joins
// the thread; when it runs on the client's own thread (the last owner released inside a
// completion), that happens right after it returns, and the thread exits by itself.
#pragma once

#include <memory>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/request.hpp"
#include "redis/scripts.hpp"
#include "redis/transport.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

// Throws config_error for options that cannot work (no connections, a zero timeout, ...).
// Connecting starts in the background: it does not wait for the server. healthy() is true
// while at least one connection is ready, the breaker is closed and calls do not fail for a
// lasting reason (NOPERM, ...: node::problem); the next answered call clears that.
std::unique_ptr<transport> make_client(const redis_endpoint& endpoint, const redis_options& options,
                                       script_set scripts);

}  // namespace floodgate::redis
