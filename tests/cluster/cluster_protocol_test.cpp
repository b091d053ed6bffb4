// Cluster protocol pieces on plain strings and replies: CRC16 slots, MOVED/ASK, CLUSTER
// SLOTS, and the redis+cluster:// and redis+sentinel:// URLs.
#include "redis/cluster_protocol.hpp"

#include <gtest/gtest.h>

#include "floodgate/errors.hpp"
#include "redis/sentinel_client.hpp"

namespace floodgate::redis {
namespace {

TEST(cluster_slot, crc16_matches_the_redis_cluster_spec) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the spec's check value
  EXPECT_EQ(key_slot("foo"), 12182);      // CLUSTER KEYSLOT foo
  EXPECT_EQ(key_slot("hello"), 866);
}

TEST(cluster_slot, hash_tag_rules) {
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("floodgate:api:gcra:{alice}"), key_slot("alice"));
  EXPECT_EQ(key_slot("foo{}{bar}"), crc16("foo{}{bar}") % cluster_slots);  // empty tag: whole key
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));  // the first '{' to the first '}'
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
}

TEST(cluster_redirect, parses_moved_and_ask) {
  auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->what, redirect::kind::moved);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->host, "127.0.0.1");
  EXPECT_EQ(m->port, 6381);
  auto a = parse_redirect("ASK 0 ::1:7000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->what, redirect::kind::ask);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 7000);
  auto empty_host = parse_redirect("MOVED 1 :7000");
  ASSERT_TRUE(empty_host);
  EXPECT_EQ(empty_host->host, "");
  for (const char* bad : {"MOVED", "MOVED 1", "MOVED x h:1", "MOVED 16384 h:1", "MOVED 1 h",
                          "MOVED 1 h:0", "MOVED 1 h:99999", "ERR MOVED 1 h:1", "TRYAGAIN x"})
    EXPECT_FALSE(parse_redirect(bad)) << bad;
}

reply integer(std::int64_t v) {
  reply r;
  r.kind = reply::type::integer;
  r.integer = v;
  return r;
}
reply string(std::string s) {
  reply r;
  r.kind = reply::type::string;
  r.str = std::move(s);
  return r;
}
reply array(std::vector<reply> e) {
  reply r;
  r.kind = reply::type::array;
  r.elements = std::move(e);
  return r;
}

TEST(cluster_slots, parses_masters_and_rejects_malformed_maps) {
  const auto r = array({
      array({integer(0), integer(5460), array({string("127.0.0.1"), integer(7000), string("id")}),
             array({string("127.0.0.1"), integer(7003), string("id2")})}),
      array({integer(5461), integer(16383), array({string("?"), integer(7001)})}),
  });
  const auto map = parse_cluster_slots(r);
  ASSERT_TRUE(map);
  ASSERT_EQ(map->size(), 2u);
  EXPECT_EQ((*map)[0].first, 0);
  EXPECT_EQ((*map)[0].last, 5460);
  EXPECT_EQ((*map)[0].port, 7000);
  EXPECT_EQ((*map)[1].host, "");  // unknown endpoint: the node that answered
  EXPECT_FALSE(parse_cluster_slots(string("x")));
  EXPECT_FALSE(parse_cluster_slots(
      array({array({integer(5), integer(4), array({string("h"), integer(1)})})})));
  EXPECT_FALSE(parse_cluster_slots(
      array({array({integer(0), integer(16384), array({string("h"), integer(1)})})})));
  EXPECT_FALSE(parse_cluster_slots(array({array({integer(0), integer(1)})})));
  EXPECT_FALSE(parse_cluster_slots(
      array({array({integer(0), integer(1), array({string("h"), integer(0)})})})));
}

TEST(cluster_url, seeds_share_credentials) {
  const auto seeds = parse_cluster_url("redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002");
  ASSERT_EQ(seeds.size(), 3u);
  EXPECT_EQ(seeds[0].host, "10.0.0.1");
  EXPECT_EQ(seeds[0].port, 7000);
  EXPECT_EQ(seeds[1].port, 6379);
  EXPECT_EQ(seeds[2].host, "::1");
  for (const auto& s : seeds) {
    EXPECT_EQ(s.user, "app");
    EXPECT_EQ(s.password, "pw");
  }
  EXPECT_TRUE(is_cluster_url("REDIS+CLUSTER://h:1"));
  EXPECT_FALSE(is_cluster_url("redis://h:1"));
}

TEST(cluster_url, rejects_bad_seed_lists_without_leaking_the_password) {
  for (const char* bad : {"redis+cluster://", "redis+cluster://h:1,", "redis+cluster://h:1,,h:2",
                          "redis+cluster://h:1/2", "redis+cluster://h:x", "redis://h:1"})
    EXPECT_THROW(parse_cluster_url(bad), config_error) << bad;
  try {
    parse_cluster_url("redis+cluster://u:topsecret@h:1,h:bad");
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("h:bad"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace floodgate::redis

namespace floodgate::redis {
namespace {

TEST(sentinel_url, sentinels_master_name_and_the_primary_credentials) {
  const auto c = parse_sentinel_url("redis+sentinel://app:pw@10.0.0.5,10.0.0.6:26380/fg/3");
  ASSERT_EQ(c.sentinels.size(), 2u);
  EXPECT_EQ(c.sentinels[0].host, "10.0.0.5");
  EXPECT_EQ(c.sentinels[0].port, 26379);  // Sentinel's default port
  EXPECT_EQ(c.sentinels[1].port, 26380);
  EXPECT_FALSE(c.sentinels[0].password);  // sentinels are asked without AUTH
  EXPECT_EQ(c.master_name, "fg");
  EXPECT_EQ(c.primary.user, "app");
  EXPECT_EQ(c.primary.password, "pw");
  EXPECT_EQ(c.primary.db, 3);
  EXPECT_TRUE(is_sentinel_url("REDIS+SENTINEL://h/m"));
}

TEST(sentinel_url, rejects_malformed_urls_without_leaking_the_password) {
  for (const char* bad : {"redis+sentinel://h:1", "redis+sentinel://h:1/", "redis+sentinel://,h/m",
                          "redis+sentinel://h:x/m", "redis+sentinel://h/m/x", "redis://h/m"})
    EXPECT_THROW(parse_sentinel_url(bad), config_error) << bad;
  try {
    parse_sentinel_url("redis+sentinel://u:topsecret@h:bad/m");
    FAIL();
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace floodgate::redis
