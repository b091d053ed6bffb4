// rediss+sentinel://: TLS to the sentinels and to the primary they name, with client
// certificates required by every process, and a failover followed over TLS.
#include <gtest/gtest.h>

#include "cluster_support.hpp"
#include "redis_sentinel.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {
namespace {

TEST(tls_sentinel, decisions_and_a_failover_over_tls) {
  tls_certificates certs;
  redis_sentinel::options so;
  so.tls = &certs;
  redis_sentinel s{so};
  backend_options o;
  o.redis.key_prefix = unique_prefix("tls-sentinel");
  o.redis.timeout = 2s;
  limiter l{s.tls_url(certs.client_query()), o};
  EXPECT_EQ(l.get_backend().kind(), "redis-sentinel");
  ASSERT_TRUE(wait_healthy(l.get_backend())) << l.get_backend().last_error();
  const policy p{"p", algorithm::sliding_log, 3, 1h};
  int admitted = 0;
  for (int i = 0; i < 5; ++i) admitted += l.check("k", p).decision.allowed ? 1 : 0;
  EXPECT_EQ(admitted, 3);
  // The state is in the primary (read over its plain port).
  EXPECT_FALSE(s.node(0).command({"KEYS", o.redis.key_prefix + "*"}).elements.empty());

  const auto failover = s.failover();
  ASSERT_EQ(failover.kind, reply::status) << failover.str;
  ASSERT_TRUE(s.wait_primary_port(s.tls_port(1), 20s));
  ASSERT_TRUE(wait_for([&] { return l.get_backend().stats().failovers_seen >= 1; }, 20s))
      << l.get_backend().last_error();
  ASSERT_TRUE(wait_for([&] { return l.check("k2", p).outcome == outcome::allowed; }, 10s));
  EXPECT_FALSE(s.node(1).command({"KEYS", o.redis.key_prefix + "*k2*"}).elements.empty());

  // Without a client certificate no sentinel completes the handshake: not_connected, and the
  // reason is the sentinel's ("tlsv13 alert certificate required").
  backend_options quick;
  quick.redis.connect_timeout = 500ms;
  limiter refused{s.tls_url("tls_ca_file=" + certs.path("ca.crt")), quick};
  const auto r = refused.check("k", p);
  EXPECT_EQ(r.error, errc::not_connected) << r.error.message();
  std::string why;
  EXPECT_TRUE(wait_for(
      [&] {
        why = refused.get_backend().last_error();
        return why.find("certificate") != std::string::npos;
      },
      2s))
      << why;
}

}  // namespace
}  // namespace floodgate::test
