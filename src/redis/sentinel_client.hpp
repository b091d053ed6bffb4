// A client for a Redis primary found through Sentinel (redis+sentinel://, topology.hpp).
//
//   auto c = make_sentinel_client(parse_sentinel_url(url), options, scripts);
//   c->submit(std::move(r));   // to the current primary, as client.hpp
//
// The credentials and db are the primary's (the sentinels get sentinel_user/sentinel_password).
// On one io thread (its node pool's, node_pool.hpp), the client keeps two connections to every
// sentinel (stream_link, stream.hpp): one subscribed to +switch-master and +promoted-slave, so a
// failover is learned when a sentinel announces it, and one for questions (SENTINEL MASTER for
// the config epoch, then get-master-addr-by-name), asked of every sentinel at once, each answer
// due within connect_timeout (or that connection is closed): at start, on (re)subscribing, at
// most every 100 ms after a call meets READONLY (a demoted primary), a lost connection or a
// timeout, and every second regardless (a silently dead subscription). An answer is believed
// unless its epoch is older than one already seen (a sentinel that has not heard of the last
// failover: sentinel_answer.hpp). When the address changes, calls go to the pool's node for
// it; the old node is retired (it finishes its calls in flight, for twice the call timeout at
// most). A READONLY reply means the script wrote nothing (a replica refuses the first write),
// so that call is held in the pool's waiting room and re-sent once to the new primary; a held
// call answers errc::timeout at its own deadline if none is named by then.
//
// Health, errors, the breaker and the script and breaker counters are the pool's, as for any
// topology (node.hpp); the counters run over every primary so far.
//
// At start-up the first answer is not taken alone (it may be a stale sentinel's): answers are
// gathered until a majority of the sentinels gave one, or none is still asked, and the newest
// is taken. The constructor waits for that, or for every sentinel to fail, connect_timeout at
// most; until a primary is known, calls fail with not_connected. Threading and completion:
// as client.hpp.
#pragma once

#include <memory>

#include "redis/scripts.hpp"
#include "redis/topology.hpp"
#include "redis/transport.hpp"

namespace floodgate::redis {

// Throws config_error for unusable options, no sentinels or unusable TLS files.
std::unique_ptr<transport> make_sentinel_client(sentinel_config config,
                                                const redis_options& options, script_set scripts);

}  // namespace floodgate::redis
