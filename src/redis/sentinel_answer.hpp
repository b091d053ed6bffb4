// What a sentinel says about the primary, and which of several sayings to believe.
//
// Sentinels can disagree for a while after a failover: the one that led it knows the new
// primary at once, the others learn it from its hello messages (~0.1–2 s later), and the old
// primary keeps accepting writes until a sentinel turns it into a replica (~8 s). A client
// that takes "the last answer naming another primary" goes back to the old one and writes
// there what its resync will erase. Every sentinel configuration carries an epoch that only
// grows with each failover: an answer older than one already seen is a sentinel that has not
// heard of the last failover, and is ignored.
//
// A sentinel is asked two questions in one write: SENTINEL MASTER (its config-epoch) and then
// SENTINEL get-master-addr-by-name (the address; from the moment the new primary is promoted
// it names that one, while SENTINEL MASTER's address stays the old one until the failover
// ends, though its epoch is already the new one). In that order, a failover between the two
// pairs the new address with the old epoch, never the old address with the new epoch.
//
//   auto a = read_answer(address_reply, read_config_epoch(master_reply), template_endpoint);
//   if (a && choice.take(*a, have_primary, primary_refused)) switch_to(a->primary);
//   if (switched_on_push) choice.pushed();
//
// Pure: no I/O, no clock (tests/cluster/sentinel_answer_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

struct sentinel_answer {
  redis_endpoint primary;
  // SENTINEL MASTER's config-epoch; none when a sentinel refused that (an ACL that allows only
  // get-master-addr-by-name).
  std::optional<std::uint64_t> epoch;
};

// "host port" as the primary's endpoint: `primary` (credentials, db, tls) with that address.
std::optional<redis_endpoint> primary_at(const redis_endpoint& primary, std::string_view host,
                                         std::string_view port_text);

// The config-epoch field of SENTINEL MASTER's reply (field/value pairs); none if absent.
std::optional<std::uint64_t> read_config_epoch(const reply& master);
// The answer made of SENTINEL get-master-addr-by-name's reply ([host, port]) and the epoch
// read before it; none when the address is not one (nil: an unknown master name).
std::optional<sentinel_answer> read_answer(const reply& address,
                                           std::optional<std::uint64_t> epoch,
                                           const redis_endpoint& primary);
// True when a sentinel refused SENTINEL MASTER (an ACL allowing less, or a sentinel without
// it): ask it get-master-addr-by-name alone from then on.
bool refuses_sentinel_master(const reply& master);

// Of the answers to one round of questions, the one to believe when nothing was known before
// (a one-off look-up: the raw state reader, the metrics sampler): the highest epoch, answers
// without one only when none has one.
std::optional<sentinel_answer> best_answer(const std::vector<sentinel_answer>& answers);

// The rules for switching on what sentinels say. The caller tracks the current primary;
// `take` says whether an answer is believed: if it names another primary, the client moves.
class primary_choice {
 public:
  // have_primary: a primary is in use. primary_refused: it answered READONLY since the client
  // switched to it (it is a replica now, whatever anyone says).
  bool take(const sentinel_answer& a, bool have_primary, bool primary_refused);
  // The client switched on a sentinel's +switch-master or +promoted-slave: a configuration
  // newer than any answer seen so far, so answers at that epoch no longer move it.
  void pushed() { push_ahead_ = true; }
  std::uint64_t epoch_seen() const { return epoch_seen_; }

 private:
  std::uint64_t epoch_seen_ = 0;
  bool push_ahead_ = false;
};

}  // namespace floodgate::redis
