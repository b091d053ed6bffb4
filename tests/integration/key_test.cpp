// Where state lives: <prefix><policy>:<algorithm>:{<key>}, hashed when it must be.
#include "redis/key.hpp"

#include <gtest/gtest.h>

#include "redis/sha256.hpp"

namespace floodgate::redis {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

const policy api{"api", algorithm::gcra, 10, 1s};
const key_format format{"floodgate:", 8};

TEST(state_key, plain_keys_are_kept_verbatim_inside_the_hash_tag) {
  EXPECT_EQ(state_key(format, api, "alice"), "floodgate:api:gcra:{alice}");
  EXPECT_EQ(state_key(format, api, "a:b"), "floodgate:api:gcra:{a:b}");
  EXPECT_EQ(state_key(format, api, "\r\n\0\xff"s), "floodgate:api:gcra:{\r\n\0\xff}"s);
  EXPECT_EQ(state_key(format, api, "12345678"), "floodgate:api:gcra:{12345678}");
  EXPECT_EQ(state_key({"", 8}, api, "x"), "api:gcra:{x}");
}

TEST(state_key, braces_hash_and_long_keys_are_hashed) {
  for (const std::string& k : {"{x}"s, "a}"s, "#x"s, "123456789"s, std::string(1'000'000, 'z')}) {
    EXPECT_TRUE(stored_as_hash(k, 8)) << k.substr(0, 20);
    EXPECT_EQ(state_key(format, api, k), "floodgate:api:gcra:{#" + sha256_hex(k) + "}");
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
}

}  // namespace
}  // namespace floodgate::redis
