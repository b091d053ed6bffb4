// The Sentinel rule for answers after a push (src/redis/sentinel_answer.hpp, primary_choice):
// once a sentinel's +switch-master moved the client, an answer at the epoch seen before the
// push predates it and must not move the client back. Issue 28, item 11: before this only the
// pure unit test (tests/cluster/sentinel_answer_test.cpp) held that rule; the integration
// tests' fake sentinels never push. This one confirms its subscription late (after the first
// round of answers) and sends +switch-master with the confirmation, while it and its peer
// keep answering questions with the old primary at the old epoch, as a sentinel that has not
// finished the failover does. The primaries are real redis-servers: where writes land is read
// back from each.
#include <gtest/gtest.h>

#include <thread>

#include "fake_sentinel.hpp"
#include "integration_support.hpp"
#include "wait_for.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

// A sentinel naming `old_port` at `epoch` whenever asked; its subscription is confirmed after
// `confirm_after`, followed at once by +switch-master from `old_port` to `new_port`.
class pushing_sentinel {
 public:
  pushing_sentinel(std::uint16_t old_port, std::uint16_t new_port, std::uint64_t epoch,
                   std::chrono::milliseconds confirm_after)
      : old_port_(old_port), new_port_(new_port), epoch_(epoch), confirm_after_(confirm_after) {}
  std::uint16_t port() const { return fake_.port(); }

 private:
  std::string answer(const fake_redis::command& c) {
    if (c.size() == 3 && c[0] == "SUBSCRIBE") {
      std::this_thread::sleep_for(confirm_after_);
      const std::string text =
          "fg 127.0.0.1 " + std::to_string(old_port_) + " 127.0.0.1 " + std::to_string(new_port_);
      return "*3\r\n" + resp_bulk("subscribe") + resp_bulk(c[1]) + ":1\r\n" + "*3\r\n" +
             resp_bulk("subscribe") + resp_bulk(c[2]) + ":2\r\n" + "*3\r\n" + resp_bulk("message") +
             resp_bulk("+switch-master") + resp_bulk(text);
    }
    if (c.size() == 3 && c[0] == "SENTINEL" && c[1] == "get-master-addr-by-name")
      return "*2\r\n" + resp_bulk("127.0.0.1") + resp_bulk(std::to_string(old_port_));
    if (c.size() == 3 && c[0] == "SENTINEL" && c[1] == "MASTER")
      return "*10\r\n" + resp_bulk("name") + resp_bulk("fg") + resp_bulk("ip") +
             resp_bulk("127.0.0.1") + resp_bulk("port") + resp_bulk(std::to_string(old_port_)) +
             resp_bulk("flags") + resp_bulk("master") + resp_bulk("config-epoch") +
             resp_bulk(std::to_string(epoch_));
    return "-ERR unexpected\r\n";
  }

  const std::uint16_t old_port_, new_port_;
  const std::uint64_t epoch_;
  const std::chrono::milliseconds confirm_after_;
  fake_redis fake_{[this](const fake_redis::command& c) { return answer(c); }};
};

std::size_t keys_matching(redis_server& r, const std::string& pattern) {
  return r.command({"KEYS", pattern}).elements.size();
}

TEST(sentinel_push, answers_at_the_epoch_before_a_push_never_move_the_client_back) {
  redis_server old_primary, new_primary;
  pushing_sentinel s{old_primary.port(), new_primary.port(), 1, 300ms};
  backend_options o;
  o.redis.key_prefix = unique_prefix("push");
  limiter l{"redis+sentinel://127.0.0.1:" + std::to_string(s.port()) + "/fg", o};
  const policy p{"p", algorithm::fixed_window, 1000, 1h};
  ASSERT_TRUE(wait_for([&] { return l.check("first", p).outcome == outcome::allowed; }, 5s))
      << l.get_backend().last_error();
  // The push (with the late confirmation) moves the client to the new primary.
  ASSERT_TRUE(wait_for([&] { return l.get_backend().stats().failovers_seen >= 1; }, 5s))
      << "the push was not followed: the test proves nothing";
  const auto moves = l.get_backend().stats().failovers_seen;
  // Two rechecks (1 s each) or more, each answering the old primary at epoch 1.
  int allowed = 0;
  const auto until = std::chrono::steady_clock::now() + 2500ms;
  for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
    allowed += l.check("after" + std::to_string(i), p).outcome == outcome::allowed ? 1 : 0;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(l.get_backend().stats().failovers_seen, moves) << "moved back by a stale answer";
  EXPECT_EQ(keys_matching(old_primary, o.redis.key_prefix + "*after*"), 0u);
  EXPECT_EQ(keys_matching(new_primary, o.redis.key_prefix + "*after*"),
            static_cast<std::size_t>(allowed));
  EXPECT_GT(allowed, 50);
}

}  // namespace
}  // namespace floodgate::test
