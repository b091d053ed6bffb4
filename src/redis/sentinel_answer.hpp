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
//   auto a = read_master_answer(reply, template_endpoint);      // SENTINEL MASTER's reply
//   if (a && choice.take(*a, have_primary, primary_refused)) switch_to(a->primary);
//   if (switched_on_push) choice.pushed();
//
// Pure: no I/O, no clock (tests/cluster/sentinel_answer_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "redis/reply.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

struct sentinel_answer {
  redis_endpoint primary;
  // SENTINEL MASTER's config-epoch; none from get-master-addr-by-name (a sentinel whose ACL
  // allows only that).
  std::optional<std::uint64_t> epoch;
  // The sentinel is leading a failover: mid-way it names the old address with the new epoch.
  bool in_failover = false;
};

// "host port" as the primary's endpoint: `primary` (credentials, db, tls) with that address.
std::optional<redis_endpoint> primary_at(const redis_endpoint& primary, std::string_view host,
                                         std::string_view port_text);

// SENTINEL MASTER <name>: field/value pairs (ip, port, flags, config-epoch, ...).
std::optional<sentinel_answer> read_master_answer(const reply& r, const redis_endpoint& primary);
// SENTINEL get-master-addr-by-name <name>: [host, port].
std::optional<sentinel_answer> read_address_answer(const reply& r, const redis_endpoint& primary);

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
