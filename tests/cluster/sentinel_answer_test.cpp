// What a sentinel says and which saying to believe (src/redis/sentinel_answer.hpp), on plain
// replies: no sentinel, no clock.
#include "redis/sentinel_answer.hpp"

#include <gtest/gtest.h>

namespace floodgate::redis {
namespace {

reply text(std::string s) {
  reply r;
  r.kind = reply::type::string;
  r.str = std::move(s);
  return r;
}

reply fields(std::initializer_list<std::string> pairs) {
  reply r;
  r.kind = reply::type::array;
  for (const auto& s : pairs) r.elements.push_back(text(s));
  return r;
}

redis_endpoint primary_template() {
  redis_endpoint e;
  e.password = "pw";
  e.db = 3;
  return e;
}

sentinel_answer at(std::uint16_t port, std::optional<std::uint64_t> epoch,
                   bool in_failover = false) {
  auto e = primary_template();
  e.host = "127.0.0.1";
  e.port = port;
  return {e, epoch, in_failover};
}

TEST(sentinel_answer, sentinel_master_gives_address_epoch_and_failover_flag) {
  const auto a = read_master_answer(
      fields({"name", "fg", "ip", "10.0.0.2", "port", "6380", "runid", "x", "flags",
              "master,failover_in_progress", "config-epoch", "7"}),
      primary_template());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->primary.host, "10.0.0.2");
  EXPECT_EQ(a->primary.port, 6380);
  EXPECT_EQ(a->primary.password, "pw");  // the primary's credentials and db are kept
  EXPECT_EQ(a->primary.db, 3);
  EXPECT_EQ(a->epoch, 7u);
  EXPECT_TRUE(a->in_failover);
  const auto calm = read_master_answer(
      fields({"ip", "h", "port", "1", "flags", "master", "config-epoch", "0"}), primary_template());
  ASSERT_TRUE(calm);
  EXPECT_FALSE(calm->in_failover);
}

TEST(sentinel_answer, unreadable_answers_are_none) {
  const auto t = primary_template();
  EXPECT_FALSE(read_master_answer(fields({"ip", "h", "port", "1"}), t));  // no epoch
  EXPECT_FALSE(read_master_answer(fields({"ip", "h", "port", "0", "config-epoch", "1"}), t));
  EXPECT_FALSE(read_master_answer(fields({"ip", "h", "port", "1", "config-epoch", "-1"}), t));
  EXPECT_FALSE(read_master_answer(fields({"ip", "h", "port", "1", "config-epoch"}), t));
  EXPECT_FALSE(read_master_answer(text("ip"), t));
  EXPECT_FALSE(read_address_answer(fields({"h"}), t));
  EXPECT_FALSE(read_address_answer(fields({"h", "70000"}), t));
  const auto a = read_address_answer(fields({"h", "6379"}), t);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->primary.port, 6379);
  EXPECT_FALSE(a->epoch);
}

TEST(primary_choice, an_older_epoch_is_never_believed) {
  primary_choice c;
  EXPECT_TRUE(c.take(at(1, 1), false, false));
  EXPECT_TRUE(c.take(at(2, 2), true, false));   // a failover: move
  EXPECT_FALSE(c.take(at(1, 1), true, false));  // a sentinel that has not heard of it
  EXPECT_FALSE(c.take(at(1, 1), true, true));   // not even when the primary refuses writes
  EXPECT_TRUE(c.take(at(2, 2), true, false));   // the same configuration again
  EXPECT_EQ(c.epoch_seen(), 2u);
}

TEST(primary_choice, the_leader_mid_failover_is_not_believed_while_a_primary_works) {
  primary_choice c;
  EXPECT_TRUE(c.take(at(2, 2), false, false));
  EXPECT_FALSE(c.take(at(1, 3, true), true, false));  // the old address with the new epoch
  EXPECT_TRUE(c.take(at(1, 3, true), false, false));  // better than nothing at start
}

TEST(primary_choice, after_a_push_answers_at_the_old_epoch_wait) {
  primary_choice c;
  EXPECT_TRUE(c.take(at(1, 1), false, false));
  c.pushed();                                   // +switch-master to port 2
  EXPECT_FALSE(c.take(at(1, 1), true, false));  // asked before the others heard of it
  EXPECT_TRUE(c.take(at(2, 2), true, false));   // the push's configuration, now with its epoch
  EXPECT_FALSE(c.take(at(1, 1), true, false));
}

TEST(primary_choice, a_late_push_is_undone_when_its_primary_refuses_writes) {
  primary_choice c;
  EXPECT_TRUE(c.take(at(3, 3), false, false));
  c.pushed();                                  // a delayed +switch-master for epoch 2's port 2
  EXPECT_FALSE(c.take(at(3, 3), true, false));
  EXPECT_TRUE(c.take(at(3, 3), true, true));   // port 2 answered READONLY: back to epoch 3's
}

TEST(primary_choice, answers_without_epoch_never_leave_a_working_primary) {
  primary_choice c;
  EXPECT_TRUE(c.take(at(1, std::nullopt), false, false));
  EXPECT_FALSE(c.take(at(2, std::nullopt), true, false));
  EXPECT_TRUE(c.take(at(2, std::nullopt), true, true));
}

}  // namespace
}  // namespace floodgate::redis
