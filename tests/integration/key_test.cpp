// Where state lives: <prefix><policy>:<algorithm>:{<key>}, hashed when it must be.
#include "redis/key.hpp"

#include <gtest/gtest.h>

#include <utility>

#include "redis/sha256.hpp"

namespace floodgate::redis {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

const policy api{"api", algorithm::gcra, 10, 1s};
const key_format format{"floodgate:", 8};

TEST(state_key, plain_keys_are_kept_verbatim_inside_the_hash_tag) {
  EXPECT_EQ(state_key(format, api, "alice"), "floodgate:api:gc:{alice}");
  EXPECT_EQ(state_key(format, api, "a:b"), "floodgate:api:gc:{a:b}");
  EXPECT_EQ(state_key(format, api, "\r\n\0\xff"s), "floodgate:api:gc:{\r\n\0\xff}"s);
  EXPECT_EQ(state_key(format, api, "12345678"), "floodgate:api:gc:{12345678}");
  EXPECT_EQ(state_key({"", 8}, api, "x"), "api:gc:{x}");
}

TEST(state_key, braces_hash_and_long_keys_are_hashed) {
  for (const std::string& k : {"{x}"s, "a}"s, "#x"s, "123456789"s, std::string(1'000'000, 'z')}) {
    EXPECT_TRUE(stored_as_hash(k, 8)) << k.substr(0, 20);
    EXPECT_EQ(state_key(format, api, k), "floodgate:api:gc:{#" + sha256_hex(k) + "}");
  }
  EXPECT_FALSE(stored_as_hash("x#", 8));
}

TEST(state_key, size_matches_the_key) {
  for (const std::string& k : {"a"s, "{"s, std::string(200, 'q'), "\0"s})
    EXPECT_EQ(state_key_size(format, api, k), state_key(format, api, k).size());
}

TEST(state_key, algorithm_is_part_of_the_key) {
  const policy same_name{"api", algorithm::sliding_log, 10, 1s};
  EXPECT_EQ(state_key(format, same_name, "alice"), "floodgate:api:sliding_log:{alice}");
  // The O(1) algorithms go by short codes (their state is one string: a short key keeps it at
  // 88 bytes of Redis memory).
  const std::pair<algorithm, std::string> codes[] = {{algorithm::sliding_window, "sw"},
                                                     {algorithm::fixed_window, "fw"},
                                                     {algorithm::token_bucket, "tb"},
                                                     {algorithm::gcra, "gc"}};
  for (const auto& [a, code] : codes) {
    const policy p{"api", a, 10, 1s};
    EXPECT_EQ(state_key(format, p, "alice"), "floodgate:api:" + code + ":{alice}");
    EXPECT_EQ(state_key_size(format, p, "alice"), state_key(format, p, "alice").size());
  }
}

}  // namespace
}  // namespace floodgate::redis
