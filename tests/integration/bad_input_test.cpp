// Keys are bytes: braces, colons, CR/LF, NUL, invalid UTF-8 and megabyte keys are stored
// under the prefix (hashed when they must be), without errors. Scripts validate their own
// arguments, so a caller bypassing floodgate cannot corrupt state either.
#include <gtest/gtest.h>

#include "integration_support.hpp"
#include "redis/key.hpp"
#include "redis/scripts.hpp"
#include "redis/sha256.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

const std::vector<std::string> odd_keys = {
    "{}"s,
    "a{b}c"s,
    "}"s,
    "{"s,
    "a:b:c"s,
    "::"s,
    "\r\n"s,
    "x\r\ny"s,
    "\0"s,
    "a\0b"s,
    "\xff\xfe"s,
    "\xc3\x28"s,
    "#hash"s,
    "#"s,
    " "s,
    "*"s,
    "floodgate:"s,
    std::string(128, 'k'),
    std::string(129, 'k'),
    std::string(1'000'000, 'x'),
    std::string(1'000'000, '\0'),
};

TEST(bad_input, odd_keys_are_stored_under_the_prefix_and_length_capped) {
  redis_server redis;
  const auto prefix = unique_prefix("odd");
  limiter l{redis.url(), redis_options_for(prefix, fixed_clock())};
  const policy p{"p", algorithm::sliding_log, 2, 1h};
  const redis::key_format format{prefix, 128};
  for (const auto& k : odd_keys) {
    const auto r1 = l.check(k, p);
    ASSERT_EQ(r1.outcome, outcome::allowed) << k.size() << " bytes: " << r1.error.message();
    EXPECT_EQ(r1.decision.remaining, 1);
    const auto r2 = l.check(k, p);
    EXPECT_EQ(r2.decision.remaining, 0) << "the same key twice is the same state";
    // The exact key, binary and all, exists.
    const auto stored = redis::state_key(format, p, k);
    EXPECT_EQ(redis.command({"EXISTS", stored}).integer, 1) << k.size() << " bytes";
  }
  // check_all with odd keys too.
  const policy q{"q", algorithm::gcra, 5, 1s};
  const auto r = l.check_all({{odd_keys[0], &q, 1}, {odd_keys[7], &q, 1}, {odd_keys[19], &q, 1}});
  EXPECT_EQ(r.outcome, outcome::allowed) << r.error.message();

  const auto keys = scan_keys(redis, prefix + "*");
  EXPECT_EQ(keys.size(), odd_keys.size() + 3);
  const std::size_t longest = prefix.size() + std::string("p:sl:{}").size() + 128;
  for (const auto& k : keys) {
    EXPECT_TRUE(k.starts_with(prefix));
    EXPECT_LE(k.size(), longest) << "capped: long keys are hashed";
  }
  // Hashed keys are '#' and 64 hex digits inside the tag.
  EXPECT_EQ(
      redis.command({"EXISTS", prefix + "p:sl:{#" + redis::sha256_hex(odd_keys[19]) + "}"})
          .integer,
      1);
}

// The scripts' own validation, called directly (as a client bypassing floodgate would).
TEST(bad_input, scripts_reject_bad_arguments_and_write_nothing) {
  redis_server redis;
  const auto& gcra = redis::script_for(algorithm::gcra);
  const auto& log = redis::script_for(algorithm::sliding_log);
  redis.command({"SCRIPT", "LOAD", std::string(gcra.source)});
  redis.command({"SCRIPT", "LOAD", std::string(log.source)});
  redis.command({"SCRIPT", "LOAD", std::string(redis::multi_script().source)});
  // ARGV = {limit, window_ms, burst, cost, now_ms}
  const std::vector<std::vector<std::string>> bad = {
      {"10", "1000", "10", "nan", ""},
      {"10", "1000", "10", "-1", ""},
      {"10", "1000", "10", "1e300", ""},
      {"10", "1000", "10", "1.5", ""},
      {"10", "1000", "10", "abc", ""},
      {"10", "1000", "10", "", ""},
      {"10", "1000", "10", "inf", ""},
      {"10", "1000", "10", "-inf", ""},
      {"10", "1000", "10", "99999999999999999999", ""},
      {"0", "1000", "10", "1", ""},
      {"10", "0", "10", "1", ""},
      {"10", "-5", "10", "1", ""},
      {"10", "1000", "0", "1", ""},
      {"nan", "1000", "10", "1", ""},
      {"10", "1e309", "10", "1", ""},
      {"10", "1000", "10", "1", "nan"},
      {"10", "1000", "10", "1", "1.5"},
      {"10", "1000", "10", "1", "soon"},
      {"10000000000", "1000000000", "10", "1", ""},  // limit × window above 10^15
  };
  for (const auto* s : {&gcra, &log}) {
    for (const auto& argv : bad) {
      const std::string key = "fgt:direct:{" + std::string(s->name) + argv[0] + argv[1] + argv[2] +
                              argv[3] + argv[4] + "}";
      std::vector<std::string> cmd = {"EVALSHA", std::string(s->sha1), "1", key};
      cmd.insert(cmd.end(), argv.begin(), argv.end());
      const auto r = redis.command(cmd);
      EXPECT_EQ(r.kind, reply::error)
          << s->name << " accepted {" << argv[0] << ", " << argv[1] << ", " << argv[2] << ", "
          << argv[3] << ", " << argv[4] << "}";
      EXPECT_EQ(redis.command({"EXISTS", key}).integer, 0) << s->name << " wrote on bad input";
    }
    // A cost above the capacity is a valid request that can never pass: denied, never.
    const std::string key = "fgt:direct:{over}";
    const auto r =
        redis.command({"EVALSHA", std::string(s->sha1), "1", key, "10", "1000", "10", "11", ""});
    // (A lone check's denial, lua/single.lua: -1 - remaining, reset_after, retry_after.)
    ASSERT_EQ(r.kind, reply::array) << r.str;
    ASSERT_EQ(r.elements.size(), 3u);
    EXPECT_EQ(r.elements.at(0).integer, -11);
    EXPECT_EQ(r.elements.at(2).integer, -1);
    EXPECT_EQ(redis.command({"EXISTS", key}).integer, 0);
  }
  const std::string key = "fgt:direct:{k}";
  // The multi script: a bad item anywhere refuses the whole call.
  const auto r = redis.command({"EVALSHA", std::string(redis::multi_script().sha1), "2", key,
                                "fgt:direct:{k2}", "", "gcra", "10", "1000", "10", "1", "gcra",
                                "10", "1000", "10", "-3"});
  EXPECT_EQ(r.kind, reply::error);
  EXPECT_EQ(redis.command({"EXISTS", key}).integer, 0);
  // And a good call does work, so the refusals above are about the arguments.
  const auto good =
      redis.command({"EVALSHA", std::string(gcra.sha1), "1", key, "10", "1000", "10", "1", ""});
  ASSERT_EQ(good.kind, reply::number) << good.str;  // allowed, as a lone check answers it
  EXPECT_EQ(good.integer % 11, 9);
}

}  // namespace
}  // namespace floodgate::test
