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

sentinel_answer at(std::uint16_t port, std::optional<std::uint64_t> epoch) {
  auto e = primary_template();
  e.host = "127.0.0.1";
  e.port = port;
  return {e, epoch};
}

TEST(sentinel_answer, the_epoch_and_the_address_make_the_answer) {
  const auto epoch = read_config_epoch(fields({"name", "fg", "ip", "10.0.0.1", "port", "6379",
                                               "flags", "master,failover_in_progress",
                                               "config-epoch", "7"}));
  EXPECT_EQ(epoch, 7u);
  // The address is get-master-addr-by-name's: the promoted replica already, mid-failover.
  const auto a = read_answer(fields({"10.0.0.2", "6380"}), epoch, primary_template());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->primary.host, "10.0.0.2");
  EXPECT_EQ(a->primary.port, 6380);
  EXPECT_EQ(a->primary.password, "pw");  // the primary's credentials and db are kept
  EXPECT_EQ(a->primary.db, 3);
  EXPECT_EQ(a->epoch, 7u);
}

TEST(sentinel_answer, unreadable_answers_are_none) {
  const auto t = primary_template();
  EXPECT_FALSE(read_config_epoch(fields({"ip", "h", "port", "1"})));
  EXPECT_FALSE(read_config_epoch(fields({"config-epoch", "-1"})));
  EXPECT_FALSE(read_config_epoch(fields({"config-epoch", "1x"})));
  EXPECT_FALSE(read_config_epoch(fields({"ip", "h", "config-epoch"})));
  EXPECT_FALSE(read_config_epoch(text("config-epoch")));
  EXPECT_FALSE(read_answer(fields({"h"}), 1, t));
  EXPECT_FALSE(read_answer(fields({"h", "70000"}), 1, t));
  EXPECT_FALSE(read_answer(fields({"h", "0"}), 1, t));
  EXPECT_FALSE(read_answer(reply{}, 1, t));  // nil: no master of that name
  const auto a = read_answer(fields({"h", "6379"}), std::nullopt, t);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->epoch);
}

TEST(sentinel_answer, a_refused_sentinel_master_is_recognised) {
  reply r;
  r.kind = reply::type::error;
  r.str = "NOPERM User u has no permissions to run the 'sentinel|master' command";
  EXPECT_TRUE(refuses_sentinel_master(r));
  r.str = "ERR Unknown sentinel subcommand 'MASTER'";
  EXPECT_TRUE(refuses_sentinel_master(r));
  r.str = "ERR No such master with that name";
  EXPECT_FALSE(refuses_sentinel_master(r));
  EXPECT_FALSE(refuses_sentinel_master(fields({"config-epoch", "1"})));
}

TEST(sentinel_answer, the_best_of_one_round_is_the_newest_configuration) {
  EXPECT_FALSE(best_answer({}));
  EXPECT_EQ(best_answer({at(1, 1), at(2, 2), at(1, 1)})->primary.port, 2);
  EXPECT_EQ(best_answer({at(3, std::nullopt), at(1, 0)})->primary.port, 1);
  EXPECT_EQ(best_answer({at(3, std::nullopt)})->primary.port, 3);
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
