// rediss+cluster://: a real 3-master cluster serving TLS (tls-cluster yes) next to its plain
// ports. A TLS client is told the TLS ports, by CLUSTER SLOTS and by MOVED: decisions on every
// master, and after a slot moved, are exact and never fall back to plain text.
#include <gtest/gtest.h>

#include "cluster_support.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {
namespace {

TEST(cluster_tls, every_master_and_a_moved_slot_over_tls) {
  tls_certificates certs;
  redis_cluster::options o;
  o.tls = &certs;
  redis_cluster c{o};
  const auto prefix = unique_prefix("tls");
  limiter l{c.tls_url(certs.client_query() + "&timeout=2s&key_prefix=" + prefix)};
  ASSERT_TRUE(wait_healthy(l.get_backend(), 10s)) << "connected to every master over TLS";
  const policy p{"p", algorithm::sliding_log, 3, 1h};

  std::vector<std::string> keys;
  for (int m : c.masters()) keys.push_back(key_on(c, m, "tls-" + std::to_string(m) + "-"));
  ASSERT_EQ(keys.size(), 3u);
  // Move the first key's slot (still empty, so no MIGRATE) after the client learnt the map:
  // its first call meets MOVED, which must name the new owner's TLS port.
  const int slot = c.slot_of(keys[0]);
  const int from = c.master_of(slot);
  const int to = c.masters()[0] == from ? c.masters()[1] : c.masters()[0];
  c.move_slot(slot, from, to);

  for (const auto& key : keys) {
    int admitted = 0;
    for (int i = 0; i < 5; ++i) {
      const auto r = l.check(key, p);
      ASSERT_NE(r.outcome, outcome::backend_error) << key << ": " << r.error.message();
      admitted += r.decision.allowed ? 1 : 0;
    }
    EXPECT_EQ(admitted, 3) << key;
  }
  EXPECT_GE(l.get_backend().stats().redirections, 1u);
  EXPECT_EQ(c.command(to, {"EXISTS", prefix + "p:sl:{" + keys[0] + "}"}).integer, 1)
      << "decided on the slot's new owner";

  // Without a client certificate every node refuses the handshake.
  backend_options bo;
  bo.redis.timeout = 2s;
  limiter refused{c.tls_url("tls_ca_file=" + certs.path("ca.crt")), bo};
  const auto r = refused.check(keys[1], p);
  EXPECT_EQ(r.outcome, outcome::backend_error);
}

}  // namespace
}  // namespace floodgate::test
