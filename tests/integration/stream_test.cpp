// The one stream under every Redis socket (src/redis/stream.hpp), against real redis-servers:
// the greeting in the server's words, replies in order with commands queued before connecting,
// the connect deadline, TLS with verification by address and by name, and which names SNI
// carries.
#include "redis/stream.hpp"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "integration_support.hpp"
#include "redis/resp_writer.hpp"
#include "tls_redis.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using redis::stream;
using redis::stream_config;

// Records what a stream tells its owner.
struct recorder final : redis::stream_owner {
  void stream_ready() override { ready = true; }
  void stream_reply(redis::reply& r) override { replies.push_back(std::move(r)); }
  void stream_closed(const std::string& why, std::error_code) override { closed = why; }

  bool ready = false;
  std::vector<redis::reply> replies;
  std::optional<std::string> closed;
};

stream_config plain(std::uint16_t port) {
  stream_config c;
  c.endpoint.host = "127.0.0.1";
  c.endpoint.port = port;
  c.connect_timeout = 2s;
  return c;
}

// Runs `io` until `done` or `limit`; whether `done`.
template <class Done>
bool run_until(asio::io_context& io, Done done, std::chrono::milliseconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  io.restart();
  while (!done() && std::chrono::steady_clock::now() < until) io.run_one_for(10ms);
  return done();
}

std::string encoded(const std::vector<std::string>& args) {
  std::string out;
  redis::append_array_header(out, args.size());
  for (const auto& a : args) redis::append_bulk(out, std::string_view(a));
  return out;
}

TEST(stream, commands_queued_before_connecting_follow_the_greeting_in_order) {
  redis_server redis;
  redis.command({"ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all"});
  asio::io_context io;
  recorder r;
  stream s{io, r};
  auto c = plain(redis.port());
  c.greeting.user = "app";
  c.greeting.password = "pw";
  c.greeting.db = 3;
  c.greeting.check_version = true;
  s.open(c);
  s.out() += encoded({"SET", "k", "v"}) + encoded({"ACL", "WHOAMI"});
  s.flush();
  s.out() += encoded({"CLIENT", "INFO"});
  s.flush();
  ASSERT_TRUE(run_until(io, [&] { return r.replies.size() == 3 || r.closed; })) << "no replies";
  ASSERT_FALSE(r.closed) << *r.closed;
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.replies[0].str, "OK");
  EXPECT_EQ(r.replies[1].str, "app") << "AUTH as the greeting's user";
  EXPECT_NE(r.replies[2].str.find(" db=3 "), std::string::npos) << r.replies[2].str;
  EXPECT_EQ(redis.command({"SELECT", "3"}).str, "OK");
}

TEST(stream, a_refused_greeting_closes_it_in_the_servers_words) {
  redis_server redis;
  redis.command({"ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all"});
  struct bad {
    std::string user, password;
    std::int64_t db;
    std::string says;
  } cases[] = {{"app", "wrong", 0, "AUTH refused: WRONGPASS"},
               {"app", "pw", 99, "SELECT 99: ERR DB index is out of range"}};
  for (const auto& b : cases) {
    asio::io_context io;
    recorder r;
    stream s{io, r};
    auto c = plain(redis.port());
    c.greeting.user = b.user;
    c.greeting.password = b.password;
    c.greeting.db = b.db;
    s.open(c);
    s.out() += encoded({"PING"});
    s.flush();
    ASSERT_TRUE(run_until(io, [&] { return r.closed.has_value(); })) << b.says;
    EXPECT_EQ(r.closed->rfind(b.says, 0), 0u) << *r.closed;
    EXPECT_FALSE(r.ready);
    EXPECT_TRUE(r.replies.empty()) << "the PING queued behind a refused greeting is not answered";
    EXPECT_FALSE(s.is_open());
  }
}

TEST(stream, a_server_that_never_answers_the_greeting_fails_at_connect_timeout) {
  redis_server redis;
  redis.pause();  // accepts (the kernel does), answers nothing
  asio::io_context io;
  recorder r;
  stream s{io, r};
  auto c = plain(redis.port());
  c.connect_timeout = 200ms;
  c.greeting.check_version = true;
  const auto start = std::chrono::steady_clock::now();
  s.open(c);
  ASSERT_TRUE(run_until(io, [&] { return r.closed.has_value(); }));
  const auto took = std::chrono::steady_clock::now() - start;
  redis.resume();
  EXPECT_EQ(*r.closed, "no connection and handshake within connect_timeout (200 ms)");
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 200ms + 500ms * timing_factor);
}

// The server certificate names IP:127.0.0.1 and DNS:localhost (tls_certificates.hpp).
TEST(stream, tls_verifies_the_peer_by_address_and_by_name) {
  tls_redis r;
  const auto make = [&](const std::string& host, const std::string& server_name, bool trusted) {
    auto c = plain(r.tls_port);
    c.endpoint.host = host;
    c.endpoint.tls = true;
    c.tls.ca_file = r.certs.path(trusted ? "ca.crt" : "other.crt");
    c.tls.cert_file = r.certs.path("client.crt");
    c.tls.key_file = r.certs.path("client.key");
    c.tls.server_name = server_name;
    c.tls_context = redis::make_tls_context(c.tls);
    return c;
  };
  struct attempt {
    std::string host, server_name;
    bool trusted, succeeds;
  } attempts[] = {{"127.0.0.1", "", true, true},
                  {"localhost", "", true, true},
                  {"127.0.0.1", "localhost", true, true},
                  {"localhost", "127.0.0.1", true, true},
                  {"127.0.0.1", "example.org", true, false},
                  {"127.0.0.1", "127.0.0.2", true, false},
                  {"127.0.0.1", "", false, false}};
  for (const auto& a : attempts) {
    const auto what = a.host + " as '" + a.server_name + "'" + (a.trusted ? "" : " untrusted");
    asio::io_context io;
    recorder rec;
    stream s{io, rec};
    s.open(make(a.host, a.server_name, a.trusted));
    s.out() += encoded({"PING"});
    s.flush();
    ASSERT_TRUE(run_until(io, [&] { return !rec.replies.empty() || rec.closed; })) << what;
    if (a.succeeds) {
      EXPECT_FALSE(rec.closed) << what << ": " << *rec.closed;
      ASSERT_EQ(rec.replies.size(), 1u) << what;
      EXPECT_EQ(rec.replies[0].str, "PONG") << what;
    } else {
      ASSERT_TRUE(rec.closed) << what;
      EXPECT_EQ(rec.closed->rfind("TLS handshake: ", 0), 0u) << what << ": " << *rec.closed;
    }
  }
}

// SNI (RFC 6066) carries host names only, never an address; Redis does not look at it, so the
// client's own SSL object is asked what it will send.
TEST(stream, sni_names_a_host_never_an_address) {
  asio::io_context io;
  asio::ssl::context ctx{asio::ssl::context::tls_client};
  const auto sni_of = [&](const std::string& name) -> std::string {
    asio::ip::tcp::socket socket{io};
    asio::ssl::stream<asio::ip::tcp::socket&> tls{socket, ctx};
    redis::name_tls_peer(tls, name, true);
    const char* sent = SSL_get_servername(tls.native_handle(), TLSEXT_NAMETYPE_host_name);
    return sent ? sent : "(none)";
  };
  EXPECT_EQ(sni_of("localhost"), "localhost");
  EXPECT_EQ(sni_of("redis.example.org"), "redis.example.org");
  EXPECT_EQ(sni_of("127.0.0.1"), "(none)");
  EXPECT_EQ(sni_of("::1"), "(none)");
}

}  // namespace
}  // namespace floodgate::test
