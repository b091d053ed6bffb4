// A client for a Redis Cluster: routes each call to the master of its keys' hash slot over
// that node's pipelined connections (connection.hpp, the same as a single server's), and
// follows the cluster as it changes.
//
//   auto c = make_cluster_client(parse_cluster_url(url), options, scripts);
//   r->slot = key_slot(key);   // every key of one call shares a slot (a hash tag)
//   c->submit(std::move(r));
//
// What it does, all within the call's deadline:
// - Discovers the slot map with CLUSTER SLOTS from any seed, and again after a MOVED, a lost
//   node connection, a CLUSTERDOWN, or while a slot has no reachable master (at most every
//   100 ms). Until the map is known, calls go to any node and follow its MOVED.
// - MOVED: updates the slot's owner and re-sends there. ASK: re-sends to the importing node
//   with ASKING right before the call on the same connection (not remembered). TRYAGAIN,
//   CLUSTERDOWN: re-sent after a short backoff. At most 5 redirections per call.
// - A call that may have run (its connection was lost with it in flight, or it timed out) is
//   never re-sent: it fails, and the policy's failure mode answers.
// - Each node is a node.hpp, with its breaker, scripts and problems as a single server's
//   (client.hpp): last_error() is the newest node's (MOVED, ASK and TRYAGAIN are routing, not
//   problems); healthy() is false while a slot has no reachable master, a master's breaker is
//   open, or a node fails for a lasting reason (NOPERM) until it answers a call again.
//
// Threading, completion and shutdown: as client.hpp says.
#pragma once

#include <memory>
#include <vector>

#include "redis/scripts.hpp"
#include "redis/transport.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

// Throws config_error for unusable options or no seeds. Does not wait for the cluster.
std::unique_ptr<transport> make_cluster_client(std::vector<redis_endpoint> seeds,
                                               const redis_options& options, script_set scripts);

}  // namespace floodgate::redis
