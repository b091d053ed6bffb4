#include "floodgate/policy.hpp"

#include <gtest/gtest.h>

#include "floodgate/errors.hpp"

namespace floodgate {
namespace {

using namespace std::chrono_literals;

// Builds the policy and returns the error message, or "" if it was accepted.
template <class... Args>
std::string error_of(Args&&... args) {
  try {
    policy p(std::forward<Args>(args)...);
    return "";
  } catch (const config_error& e) {
    return e.what();
  }
}

TEST(policy, valid_policies_keep_their_values) {
  const policy p("api", algorithm::gcra, 100, 60s, 20, failure_mode::open);
  EXPECT_EQ(p.name(), "api");
  EXPECT_EQ(p.algo(), algorithm::gcra);
  EXPECT_EQ(p.limit(), 100);
  EXPECT_EQ(p.window(), 60s);
  EXPECT_EQ(p.burst(), 20);
  EXPECT_EQ(p.capacity(), 20);
  EXPECT_EQ(p.on_failure(), failure_mode::open);
}

TEST(policy, burst_defaults_to_the_limit) {
  EXPECT_EQ(policy("a", algorithm::token_bucket, 7, 1s).burst(), 7);
  EXPECT_EQ(policy("a", algorithm::sliding_log, 7, 1s).capacity(), 7);
  EXPECT_EQ(policy("a", algorithm::sliding_log, 7, 1s).on_failure(), failure_mode::closed);
}

TEST(policy, bad_values_are_rejected_with_a_clear_message) {
  struct bad {
    std::string message;
    std::string expected;
  };
  const bad cases[] = {
      {error_of("api", algorithm::sliding_log, 0, 1s), "limit must be at least 1 (got 0)"},
      {error_of("api", algorithm::sliding_log, -5, 1s), "limit must be at least 1 (got -5)"},
      {error_of("api", algorithm::fixed_window, 10, 0ms), "window must be at least 1ms (got 0ms)"},
      {error_of("api", algorithm::fixed_window, 10, -1000ms), "window must be at least 1ms"},
      {error_of("api", algorithm::token_bucket, 10, 1s, 0), "burst must be at least 1 (got 0)"},
      {error_of("api", algorithm::gcra, 10, 1s, -3), "burst must be at least 1 (got -3)"},
      {error_of("api", algorithm::sliding_log, 10, 1s, 5), "burst applies only to token_bucket"},
      {error_of("", algorithm::gcra, 10, 1s), "name must not be empty"},
      {error_of("a:b", algorithm::gcra, 10, 1s), "name may hold only"},
      {error_of("a{b}", algorithm::gcra, 10, 1s), "name may hold only"},
      {error_of(std::string(65, 'x'), algorithm::gcra, 10, 1s), "longer than 64"},
      {error_of("api", algorithm::sliding_log, 1'000'000'000, std::chrono::hours(24 * 365)),
       "at most 10^15"},
      {error_of("api", algorithm::gcra, 1, 1'000'000s, 2'000'000'000), "at most 10^15"},
  };
  for (const auto& c : cases) {
    EXPECT_NE(c.message.find(c.expected), std::string::npos)
        << "got '" << c.message << "', expected it to contain '" << c.expected << "'";
    EXPECT_NE(c.message.find("policy '"), std::string::npos) << c.message;
  }
}

TEST(policy, block_for_is_validated_and_part_of_equality) {
  const policy p{"login", algorithm::sliding_log, 5, 1min};
  EXPECT_EQ(p.block_for(), 0ms);
  const auto q = p.with_block_for(15min);
  EXPECT_EQ(q.block_for(), 15min);
  EXPECT_NE(p, q) << "a reload that changes block_for must be seen";
  EXPECT_EQ(q.with_block_for(0ms), p);
  EXPECT_EQ(q.with_block_for(policy::max_block_for).block_for(), policy::max_block_for);
  for (auto bad : {-1ms, policy::max_block_for + 1ms}) {
    try {
      (void)p.with_block_for(bad);
      ADD_FAILURE() << bad.count() << " accepted";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find("policy 'login': block_for must be in 0..10^15 ms"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(policy, names_round_trip) {
  for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                 algorithm::token_bucket, algorithm::gcra})
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  EXPECT_EQ(parse_algorithm("leaky"), std::nullopt);
  EXPECT_EQ(parse_failure_mode("open"), failure_mode::open);
  EXPECT_EQ(parse_failure_mode("closed"), failure_mode::closed);
  EXPECT_EQ(parse_failure_mode("maybe"), std::nullopt);
  EXPECT_TRUE(is_exact(algorithm::gcra));
  EXPECT_FALSE(is_exact(algorithm::sliding_window));
}

}  // namespace
}  // namespace floodgate
