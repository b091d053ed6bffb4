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
  EXPECT_EQ(state_key(format, api, "alice"), "floodgate:api:gt100:{alice}");
  EXPECT_EQ(state_key(format, api, "a:b"), "floodgate:api:gt100:{a:b}");
  EXPECT_EQ(state_key(format, api, "\r\n\0\xff"s), "floodgate:api:gt100:{\r\n\0\xff}"s);
  EXPECT_EQ(state_key(format, api, "12345678"), "floodgate:api:gt100:{12345678}");
  EXPECT_EQ(state_key({"", 8}, api, "x"), "api:gt100:{x}");
}

TEST(state_key, braces_hash_and_long_keys_are_hashed) {
  for (const std::string& k : {"{x}"s, "a}"s, "#x"s, "123456789"s, std::string(1'000'000, 'z')}) {
    EXPECT_TRUE(stored_as_hash(k, 8)) << k.substr(0, 20);
    EXPECT_EQ(state_key(format, api, k), "floodgate:api:gt100:{#" + sha256_hex(k) + "}");
  }
  EXPECT_FALSE(stored_as_hash("x#", 8));
}

TEST(state_key, size_matches_the_key) {
  for (const std::string& k : {"a"s, "{"s, std::string(200, 'q'), "\0"s})
    EXPECT_EQ(state_key_size(format, api, k), state_key(format, api, k).size());
}

// The block key's size goes into its RESP header: one byte off broke every penalty call.
TEST(state_key, block_key_size_matches_the_key_and_lease_keys_share_the_tag) {
  for (const std::string& k : {"a"s, "{"s, std::string(200, 'q'), "\0"s}) {
    std::string block;
    append_block_key(block, format, api, k);
    EXPECT_EQ(block_key_size(format, api, k), block.size());
  }
  std::string block;
  append_block_key(block, format, api, "alice");
  EXPECT_EQ(block, "floodgate:api:bk:{alice}");
  EXPECT_EQ(lease_key(format, concurrency_policy("jobs", 2, 1s), "alice"),
            "floodgate:jobs:cc:{alice}");
}

// As a script call's KEYS: the RESP header's size is the key's, plain or hashed.
TEST(state_key, bulk_forms_carry_the_keys_own_size) {
  for (const std::string& k : {"a"s, "{"s, std::string(200, 'q'), "\0"s}) {
    const std::string state = state_key(format, api, k);
    std::string block;
    append_block_key(block, format, api, k);
    std::string bulk;
    append_state_key_bulk(bulk, format, api, k);
    EXPECT_EQ(bulk, "$" + std::to_string(state.size()) + "\r\n" + state + "\r\n");
    bulk.clear();
    append_block_key_bulk(bulk, format, api, k);
    EXPECT_EQ(bulk, "$" + std::to_string(block.size()) + "\r\n" + block + "\r\n");
  }
}

TEST(state_key, algorithm_is_part_of_the_key) {
  const policy same_name{"api", algorithm::sliding_log, 10, 1s};
  EXPECT_EQ(state_key(format, same_name, "alice"), "floodgate:api:sl:{alice}");
  // The O(1) algorithms go by short codes (their state is one string: a short key keeps it at
  // 88 bytes of Redis memory); token_bucket and gcra add their state's units (state_unit.hpp).
  const std::pair<algorithm, std::string> codes[] = {{algorithm::sliding_window, "sw"},
                                                     {algorithm::fixed_window, "fw"},
                                                     {algorithm::token_bucket, "tb100"},
                                                     {algorithm::gcra, "gt100"}};
  for (const auto& [a, code] : codes) {
    const policy p{"api", a, 10, 1s};
    EXPECT_EQ(state_key(format, p, "alice"), "floodgate:api:" + code + ":{alice}");
    EXPECT_EQ(state_key_size(format, p, "alice"), state_key(format, p, "alice").size());
  }
}

// A state is never read in another policy's units: token_bucket's level is in g/W token
// (g = gcd(L, W): core::params::of), so W/g is in its key; gcra's TAT is a debt of time worth
// requests only at one emission interval W/L, kept as a reduced fraction (equal rates share
// state).
TEST(state_key, units_of_the_state_are_part_of_the_key) {
  auto key = [](algorithm a, std::int64_t l, std::chrono::milliseconds w) {
    return state_key(format, policy{"p", a, l, w}, "k");
  };
  EXPECT_EQ(key(algorithm::token_bucket, 5, 60s), "floodgate:p:tb12000:{k}");
  EXPECT_EQ(key(algorithm::token_bucket, 7, 60s), "floodgate:p:tb60000:{k}");
  EXPECT_EQ(key(algorithm::token_bucket, 100, 60s), "floodgate:p:tb600:{k}");
  EXPECT_EQ(key(algorithm::token_bucket, 200, 120s), "floodgate:p:tb600:{k}");
  EXPECT_EQ(key(algorithm::gcra, 10, 1s), "floodgate:p:gt100:{k}");
  EXPECT_EQ(key(algorithm::gcra, 600, 1min), "floodgate:p:gt100:{k}");
  EXPECT_EQ(key(algorithm::gcra, 7, 1min), "floodgate:p:gt60000/7:{k}");
  EXPECT_EQ(key(algorithm::gcra, 3000, 1s), "floodgate:p:gt1/3:{k}");
  EXPECT_EQ(key(algorithm::fixed_window, 3000, 1s), "floodgate:p:fw:{k}");
}

}  // namespace
}  // namespace floodgate::redis
