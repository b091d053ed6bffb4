// rediss://: a real redis-server with its TLS port open and client certificates required
// (Redis's default), certificates made by the openssl tool for each run. Decisions over TLS,
// and every way the handshake can refuse: wrong CA, wrong name, no client certificate, plain
// text to the TLS port. Bad TLS files are errors at start-up.
#include <gtest/gtest.h>

#include "integration_support.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

class tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new tls_certificates();
    tls_port_ = free_port();
    redis_server::options o;
    o.extra_args = certs_->server_args(tls_port_);
    redis_ = new redis_server(o);
  }
  static void TearDownTestSuite() {
    delete redis_;
    delete certs_;
    redis_ = nullptr;
    certs_ = nullptr;
  }

  // rediss:// to the TLS port with the given query options.
  static std::string url(const std::string& query) {
    return "rediss://127.0.0.1:" + std::to_string(tls_port_) + "?" + query;
  }
  static std::string trusted() { return certs_->client_query(); }

  // One check through a fresh backend on `u`, with a deadline long enough for a handshake.
  static check_result check_once(const std::string& u) {
    limiter l{u, redis_options_for(unique_prefix("tls"))};
    return l.check("k", policy{"p", algorithm::gcra, 10, 1s});
  }

  static tls_certificates* certs_;
  static redis_server* redis_;
  static std::uint16_t tls_port_;
};
tls_certificates* tls::certs_ = nullptr;
redis_server* tls::redis_ = nullptr;
std::uint16_t tls::tls_port_ = 0;

TEST_F(tls, decisions_over_tls_are_exact_and_land_in_the_same_redis) {
  const auto prefix = unique_prefix("tls-exact");
  limiter l{url(trusted() + "&key_prefix=" + prefix), redis_options_for("ignored:")};
  const policy p{"p", algorithm::sliding_log, 5, 1min};
  int admitted = 0;
  for (int i = 0; i < 12; ++i) {
    const auto r = l.check("alice", p);
    ASSERT_NE(r.outcome, outcome::backend_error) << r.error.message();
    admitted += r.decision.allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 5);
  // The same server seen over its plain port: the state is there, with its TTL.
  EXPECT_EQ(scan_keys(*redis_, prefix + "*"), std::vector<std::string>{prefix + "p:sl:{alice}"});
  EXPECT_EQ(sliding_log_units(*redis_, prefix + "p:sl:{alice}"), 5);
}

TEST_F(tls, the_server_name_may_be_a_host_name_in_the_certificate) {
  const auto r = check_once(url(trusted() + "&tls_server_name=localhost"));
  EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();
}

TEST_F(tls, a_refused_handshake_is_not_connected_and_fails_fast) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"a server certificate from another CA", "tls_ca_file=" + certs_->path("other.crt") +
                                                   "&tls_cert_file=" + certs_->path("client.crt") +
                                                   "&tls_key_file=" + certs_->path("client.key")},
      {"a certificate that does not name the server", trusted() + "&tls_server_name=example.org"},
      {"no client certificate", "tls_ca_file=" + certs_->path("ca.crt")},
  };
  for (const auto& [why, query] : refused) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = check_once(url(query));
    EXPECT_EQ(r.outcome, outcome::backend_error) << why;
    EXPECT_EQ(r.error, errc::not_connected) << why << ": " << r.error.message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << why << ": not the 2 s deadline";
  }
}

TEST_F(tls, verification_can_be_turned_off_for_tests_only) {
  const auto r = check_once(url("tls_verify=no&tls_ca_file=" + certs_->path("other.crt") +
                                "&tls_cert_file=" + certs_->path("client.crt") +
                                "&tls_key_file=" + certs_->path("client.key")));
  EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();
}

TEST_F(tls, plain_text_and_tls_do_not_mix) {
  // redis:// to the TLS port: the server waits for a TLS hello and drops the connection.
  const auto plain = check_once("redis://127.0.0.1:" + std::to_string(tls_port_));
  EXPECT_EQ(plain.outcome, outcome::backend_error);
  // rediss:// to the plain port: no TLS server there. Redis reads the ClientHello as an inline
  // command: when its random bytes hold a newline it answers an error and the handshake fails
  // at once (not_connected); when they do not, it waits for the rest of the line and the
  // check's deadline comes first (timeout). Either way no decision is made.
  const auto secure =
      check_once("rediss://127.0.0.1:" + std::to_string(redis_->port()) + "?" + trusted());
  EXPECT_EQ(secure.outcome, outcome::backend_error);
  EXPECT_TRUE(secure.error == errc::not_connected || secure.error == errc::timeout)
      << secure.error.message();
}

TEST_F(tls, unusable_tls_settings_are_errors_at_start_up) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"tls_ca_file=/nonexistent/ca.crt", "tls ca_file '/nonexistent/ca.crt'"},
      {"tls_cert_file=" + certs_->path("client.crt"), "cert_file and key_file go together"},
      {"tls_cert_file=" + certs_->path("client.crt") +
           "&tls_key_file=" + certs_->path("server.key"),
       "tls key_file"},
      {"tls_verify=maybe", "tls_verify must be yes or no"},
  };
  for (const auto& [query, says] : bad) {
    try {
      make_backend(url(query));
      ADD_FAILURE() << query << " was accepted";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << query << ": " << e.what();
    }
  }
  EXPECT_THROW(make_backend("rediss+cluster://127.0.0.1:7000?tls_ca_file=/nonexistent"),
               config_error);
  EXPECT_THROW(make_backend("rediss+sentinel://127.0.0.1:26379/m?tls_ca_file=/nonexistent"),
               config_error);
}

}  // namespace
}  // namespace floodgate::test
