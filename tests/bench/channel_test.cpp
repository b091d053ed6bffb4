#include "channel.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "run_result.hpp"

namespace floodgate::bench {
namespace {

TEST(channel, frames_survive_any_split) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_TRUE(write_frame(fds[1], frame_type::ready, {}));
  ASSERT_TRUE(write_frame(fds[1], frame_type::failure, "no route to host"));
  ::close(fds[1]);
  std::string bytes;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    bytes.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);

  frame_reader r;
  std::vector<frame> got;
  for (char c : bytes) {
    r.feed(std::string_view(&c, 1));
    while (auto f = r.next()) got.push_back(*f);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].type, frame_type::ready);
  EXPECT_EQ(got[1].type, frame_type::failure);
  EXPECT_EQ(got[1].payload, "no route to host");
  EXPECT_TRUE(r.empty());
}

TEST(channel, a_bad_frame_type_is_an_error) {
  frame_reader r;
  r.feed(std::string(9, '\x7f'));
  EXPECT_THROW(r.next(), std::runtime_error);
}

TEST(run_result, round_trips_through_bytes) {
  run_result a;
  a.allowed = 3;
  a.denied = 5;
  a.errors = 1;
  a.started_us = 100;
  a.finished_us = 900;
  a.first_error = "timeout";
  a.latency_us.record(42);
  a.latency_us.record(4200);
  a.admissions = {{1, 2, 1, 0, 0}, {3, 4, 2, 7, 0}};
  const auto b = run_result::deserialize(a.serialize());
  EXPECT_EQ(b.allowed, 3u);
  EXPECT_EQ(b.denied, 5u);
  EXPECT_EQ(b.errors, 1u);
  EXPECT_EQ(b.finished_us, 900);
  EXPECT_EQ(b.first_error, "timeout");
  EXPECT_EQ(b.latency_us.count(), 2u);
  EXPECT_EQ(b.latency_us.max(), 4200u);
  ASSERT_EQ(b.admissions.size(), 2u);
  EXPECT_EQ(b.admissions[1].key, 7u);
  EXPECT_EQ(b.admissions[1].cost, 2);
  EXPECT_THROW(run_result::deserialize(a.serialize().substr(0, 20)), std::runtime_error);
}

}  // namespace
}  // namespace floodgate::bench
