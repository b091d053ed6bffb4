// A block_for penalty on floodgated's memory backend outlives the eviction of other keys: an
// attacker who is blocked must not be able to clear the block by flooding distinct keys until
// the backend evicts it (memory://?max_keys bounds the keys held; docs/operations.md).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <thread>

#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

std::string check(const std::string& rule, const std::string& key) {
  return R"({"rule":")" + rule + R"(","key":")" + key + R"("})";
}

// Before: 3,000 distinct keys on an hourly rule (each held for an hour, longer than the
// block's 15 minutes, so the block was the first to go) evicted the block, and the blocked key
// was admitted again once its own 200 ms window had passed.
TEST(block_eviction, a_flood_of_other_keys_does_not_clear_a_block) {
  floodgated_process::options o;
  o.extra_args = {"--redis", "memory://?max_keys=1024"};
  floodgated_process fg(
      "rules:\n"
      "  - {name: login, algorithm: fixed_window, limit: 1, window: 200ms, block_for: 15m}\n"
      "  - {name: hourly, algorithm: fixed_window, limit: 100, window: 1h}\n",
      o);
  http_connection c(fg.port());
  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(c.request("POST", "/v1/check", check("login", "victim")).status, 200);
  ASSERT_EQ(c.request("POST", "/v1/check", check("login", "victim")).status, 429)
      << "over the limit: the 15-minute block starts";
  // Paced by the answers, one at a time on one connection.
  for (int i = 0; i < 3000; ++i)
    ASSERT_EQ(c.request("POST", "/v1/check", check("hourly", "flood-" + std::to_string(i))).status,
              200);
  // The login window itself has passed: only the block can refuse now. A peek (cost 0) always
  // asks the backend (a check might be denied by the limiter's memory of the last denial).
  std::this_thread::sleep_until(started + 300ms);
  const auto peek = c.request("POST", "/v1/check", R"({"rule":"login","key":"victim","cost":0})");
  ASSERT_EQ(peek.status, 200) << peek.body;
  const auto state = json::parse(peek.body).as_object();
  EXPECT_EQ(state.at("remaining").as_int64(), 0) << peek.body;
  EXPECT_GT(state.at("reset_after_ms").as_int64(), 14 * 60 * 1000) << peek.body;
  const auto r = c.request("POST", "/v1/check", check("login", "victim"));
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_GT(json::parse(r.body).as_object().at("retry_after_ms").as_int64(), 14 * 60 * 1000)
      << r.body;
}

}  // namespace
}  // namespace floodgate::test
