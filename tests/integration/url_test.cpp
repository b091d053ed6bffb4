// redis:// URLs: what each part means, and a clear config_error for everything else.
#include "redis/url.hpp"

#include <gtest/gtest.h>

#include "floodgate/errors.hpp"
#include "floodgate/limiter.hpp"
#include "redis/topology.hpp"

namespace floodgate::redis {
namespace {

redis_endpoint endpoint(std::string host, std::uint16_t port, std::string user = "",
                        std::optional<std::string> password = std::nullopt, std::int64_t db = 0) {
  return {std::move(host), port, std::move(user), std::move(password), db};
}

TEST(redis_url, good_urls) {
  EXPECT_EQ(parse_redis_url("redis://127.0.0.1:6379"), endpoint("127.0.0.1", 6379));
  EXPECT_EQ(parse_redis_url("redis://localhost"), endpoint("localhost", 6379));
  EXPECT_EQ(parse_redis_url("redis://localhost/"), endpoint("localhost", 6379));
  EXPECT_EQ(parse_redis_url("REDIS://Cache-1.internal_x:7000/15"),
            endpoint("Cache-1.internal_x", 7000, "", std::nullopt, 15));
  EXPECT_EQ(parse_redis_url("redis://:s3cret@127.0.0.1:6380/2"),
            endpoint("127.0.0.1", 6380, "", "s3cret", 2));
  EXPECT_EQ(parse_redis_url("redis://alice:p%40ss%3Aw0rd@h:1/0"),
            endpoint("h", 1, "alice", "p@ss:w0rd", 0));
  EXPECT_EQ(parse_redis_url("redis://alice:@h:65535"), endpoint("h", 65535, "alice", ""));
  EXPECT_EQ(parse_redis_url("redis://[::1]:7001/3"), endpoint("::1", 7001, "", std::nullopt, 3));
  EXPECT_EQ(parse_redis_url("redis://[::1]"), endpoint("::1", 6379));
  // An unencoded '@' in the password: the host starts after the last one.
  EXPECT_EQ(parse_redis_url("redis://u:a@b@h:1"), endpoint("h", 1, "u", "a@b"));
  // rediss://: the same, over TLS.
  auto secure = endpoint("h", 6380, "", "pw", 1);
  secure.tls = true;
  EXPECT_EQ(parse_redis_url("rediss://:pw@h:6380/1"), secure);
  EXPECT_FALSE(parse_redis_url("redis://h").tls);
}

TEST(redis_url, bad_urls_throw_config_error_naming_the_problem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "expected redis://"},
      {"http://h:1", "expected redis://"},
      {"redis:/h:1", "expected redis://"},
      {"rediss:/h:6379", "expected redis://"},
      {"redis://", "missing host"},
      {"redis://:6379", "missing host"},
      {"redis://h:", "port"},
      {"redis://h:0", "port"},
      {"redis://h:65536", "port"},
      {"redis://h:63x9", "port"},
      {"redis://h:-1", "port"},
      {"redis://h:1/x", "database"},
      {"redis://h:1/-1", "database"},
      {"redis://h:1/1/2", "database"},
      {"redis://h:1/99999999999", "database"},
      {"redis://h:1?timeout=5", "query"},  // parse_redis_url sees the URL without its options
      {"redis://h:1#frag", "query"},
      {"redis://alice@h:1", "userinfo"},
      {"redis://a:b%zz@h:1", "escape"},
      {"redis://a:b%4@h:1", "escape"},
      {"redis://ho st:1", "invalid character"},
      {"redis://[::1:1", "IPv6"},
      {"redis://[::1]x", "':port'"},
      {"redis://[zz]:1", "IPv6"},
  };
  for (const auto& [url, why] : cases) {
    try {
      parse_redis_url(url);
      ADD_FAILURE() << url << " was accepted";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << url << ": " << e.what();
    }
  }
}

TEST(redis_url, messages_never_show_the_password) {
  try {
    parse_redis_url("redis://alice:topsecret@h:notaport");
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("alice:***@h"), std::string::npos) << e.what();
  }
  EXPECT_EQ(redact_url("redis://:pw@h:1"), "redis://:***@h:1");
  EXPECT_EQ(redact_url("redis://h:1"), "redis://h:1");
  // The parsers take userinfo up to the last '@' (found by fuzzing: the mask stopped at the first).
  EXPECT_EQ(parse_redis_url("redis://a@b:topsecret@h:1").password, "topsecret");
  EXPECT_EQ(redact_url("redis://a@b:topsecret@h:1"), "redis://a@b:***@h:1");
  EXPECT_EQ(redact_url("redis://u:top@secret@h:1/0"), "redis://u:***@h:1/0");
  EXPECT_EQ(redact_url("redis+sentinel://a@b:pw@s:1/m?tls_ca_file=/x@y"),
            "redis+sentinel://a@b:***@s:1/m?tls_ca_file=/x@y");
  // A password holding "password=" (found by fuzzing: masking that as a query option ate the
  // '@' that ends the userinfo, and then the password itself was shown).
  EXPECT_EQ(parse_redis_url("redis://:my-password=@h:1").password, "my-password=");
  EXPECT_EQ(redact_url("redis://:my-password=@h:1"), "redis://:***@h:1");
  EXPECT_EQ(redact_url("redis+sentinel://s:1/m?sentinel_password=x&a=1"),
            "redis+sentinel://s:1/m?sentinel_password=***&a=1");
}

TEST(redis_url, make_backend_rejects_bad_urls_at_construction) {
  EXPECT_THROW(make_backend("redis://h:notaport"), config_error);
  EXPECT_THROW(make_backend("rediss://127.0.0.1:6379?tls_ca_file=/nonexistent.pem"), config_error);
  EXPECT_THROW(make_backend("redis+cluster://127.0.0.1:7000/3"), config_error);  // db 0 only
  EXPECT_THROW(make_backend("redis+cluster://127.0.0.1:7000,"), config_error);
  EXPECT_THROW(make_backend("mysql://h"), config_error);
  backend_options bad;
  bad.redis.connections = 0;
  EXPECT_THROW(make_backend("redis://127.0.0.1:1", bad), config_error);
  bad = {};
  bad.redis.key_prefix = "{tag}";
  EXPECT_THROW(make_backend("redis://127.0.0.1:1", bad), config_error);
  bad = {};
  bad.redis.reconnect_backoff_max = std::chrono::milliseconds(1);
  EXPECT_THROW(make_backend("redis://127.0.0.1:1", bad), config_error);
}

TEST(redis_url_options, the_query_string_tunes_the_client) {
  using namespace std::chrono_literals;
  redis_options o;
  EXPECT_EQ(apply_url_options("redis://h:1/2", o), "redis://h:1/2");
  EXPECT_EQ(o.timeout, redis_options{}.timeout) << "no query: nothing changes";

  const auto base = apply_url_options(
      "redis://u:p@h:1/2?timeout=120ms&connect_timeout=3s&connections=8&key_prefix=rl:v2."
      "&breaker_failures=3&breaker_open_for=2s&batch=16&writes_in_flight=1",
      o);
  EXPECT_EQ(o.max_batch_items, 16u);
  EXPECT_EQ(o.max_writes_in_flight, 1u);
  EXPECT_EQ(o.breaker_failures, 3);
  EXPECT_EQ(o.breaker_open_for, 2000ms);
  EXPECT_EQ(base, "redis://u:p@h:1/2");
  EXPECT_EQ(o.timeout, 120ms);
  EXPECT_EQ(o.connect_timeout, 3000ms);
  EXPECT_EQ(o.connections, 8u);
  EXPECT_EQ(o.key_prefix, "rl:v2.");

  redis_options c;
  EXPECT_EQ(apply_url_options("redis+cluster://a:1,b:2?timeout=1s", c), "redis+cluster://a:1,b:2");
  EXPECT_EQ(c.timeout, 1000ms);
}

TEST(redis_url_options, bad_options_name_the_option_and_hide_the_password) {
  const std::pair<const char*, const char*> cases[] = {
      {"redis://h:1?", "empty query string"},
      {"redis://h:1?timeout=5", "timeout must be a duration of at least 1ms"},
      {"redis://h:1?timeout=0ms", "timeout must be a duration of at least 1ms"},
      {"redis://h:1?timeout=-5ms", "timeout must be"},
      {"redis://h:1?connect_timeout=soon", "connect_timeout must be"},
      {"redis://h:1?connections=0", "connections must be a number from 1 to 1024 (got '0')"},
      {"redis://h:1?connections=2000", "connections must be"},
      {"redis://h:1?connections=2x", "connections must be"},
      {"redis://h:1?key_prefix=a{b}", "key_prefix may hold only"},
      {"redis://h:1?batch=0", "batch must be a number from 1 to 1024 (got '0')"},
      {"redis://h:1?batch=2000", "batch must be"},
      {"redis://h:1?writes_in_flight=0", "writes_in_flight must be a number from 1 to 65536"},
      {"redis://h:1?breaker_failures=0", "breaker_failures must be a number from 1"},
      {"redis://h:1?breaker_open_for=1", "breaker_open_for must be a duration"},
      {"redis://h:1?timeout", "option 'timeout' has no value"},
      {"redis://h:1?timeout=1s&timeout=2s", "option 'timeout' given twice"},
      {"redis://h:1?=1", "an option without a name"},
      {"redis://h:1?tiemout=1s", "unknown option 'tiemout' (expected timeout, connect_timeout"},
      {"redis://h:1?timeout=1s#x", "fragments"},
      {"redis://h:1?tls_ca_file=/ca.pem",
       "option 'tls_ca_file' applies to rediss://, rediss+cluster:// and rediss+sentinel:// URLs "
       "only"},
      {"redis+cluster://h:1?sentinel_password=x",
       "option 'sentinel_password' applies to redis+sentinel:// URLs only"},
  };
  for (const auto& [url, why] : cases) {
    redis_options o;
    try {
      apply_url_options(url, o);
      ADD_FAILURE() << url << " was accepted";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << url << ": " << e.what();
    }
  }
  redis_options o;
  try {
    apply_url_options("redis://app:s3cret@h:1?bogus=1", o);
    ADD_FAILURE() << "accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
  }
  try {
    apply_url_options("redis+sentinel://h:1/m?sentinel_password=pw%26x&sentinel_user=u&x=1", o);
    ADD_FAILURE() << "accepted";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("sentinel_password=***&sentinel_user=u"),
              std::string::npos)
        << e.what();
  }
  redis_options s;
  apply_url_options("redis+sentinel://h:1/m?sentinel_user=app&sentinel_password=pw", s);
  EXPECT_EQ(s.sentinel_user, "app");
  EXPECT_EQ(s.sentinel_password, "pw");
  EXPECT_THROW(make_backend("redis://h:1?connections=0"), config_error)
      << "make_backend applies them";
}

// Only on Redis Cluster can the keys of one check_all be on different nodes; known before
// anything is connected (floodgated checks its groups against it at load).
TEST(redis_url, only_a_cluster_backend_needs_one_key_per_check_all) {
  EXPECT_FALSE(make_backend("memory://")->check_all_needs_one_key());
  EXPECT_FALSE(make_backend("redis://127.0.0.1:1")->check_all_needs_one_key());
  EXPECT_FALSE(make_backend("redis+sentinel://127.0.0.1:1/mymaster")->check_all_needs_one_key());
  EXPECT_TRUE(make_backend("redis+cluster://127.0.0.1:1")->check_all_needs_one_key());
}

}  // namespace
}  // namespace floodgate::redis
