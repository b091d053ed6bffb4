// connection_table: the gRPC port's caps bookkeeping, with a fake descriptor probe.
#include "connection_table.hpp"

#include <gtest/gtest.h>

#include <map>

namespace floodgate::service::envoy {
namespace {

using verdict = connection_table::verdict;

// Descriptors and the inode each holds now (absent: closed).
struct fake_fds {
  std::map<int, std::uint64_t> open;
  int probes = 0;
  connection_table::still_open probe() {
    return [this](int fd, std::uint64_t inode) {
      ++probes;
      const auto it = open.find(fd);
      return it != open.end() && it->second == inode;
    };
  }
};

TEST(connection_table, caps_in_all_and_per_address) {
  fake_fds fds;
  connection_table t({.max_connections = 3, .max_per_peer = 2}, fds.probe());
  for (int fd = 10; fd < 16; ++fd) fds.open[fd] = 100 + fd;
  EXPECT_EQ(t.admit(10, 110, "a"), verdict::admitted);
  EXPECT_EQ(t.admit(11, 111, "a"), verdict::admitted);
  EXPECT_EQ(t.admit(12, 112, "a"), verdict::over_per_peer);
  EXPECT_EQ(t.admit(13, 113, "b"), verdict::admitted);
  EXPECT_EQ(t.admit(14, 114, "c"), verdict::over_global);
  EXPECT_EQ(t.size(), 3u);
}

// A connection closed by someone else is forgotten when a cap would refuse: its slot comes
// back to its address (issue 28, item 11b's class of bug), and no probe runs below the caps.
TEST(connection_table, closed_connections_give_their_slots_back) {
  fake_fds fds;
  connection_table t({.max_connections = 10, .max_per_peer = 2}, fds.probe());
  fds.open = {{10, 110}, {11, 111}};
  EXPECT_EQ(t.admit(10, 110, "a"), verdict::admitted);
  EXPECT_EQ(t.admit(11, 111, "a"), verdict::admitted);
  EXPECT_EQ(fds.probes, 0);
  for (int round = 0; round < 20; ++round) {
    // The oldest closes; the next connection gets a new descriptor (or the same number again).
    const int closed = fds.open.begin()->first;
    fds.open.erase(closed);
    const int fd = round % 2 ? closed : 20 + round;
    fds.open[fd] = 1000 + static_cast<std::uint64_t>(round);
    EXPECT_EQ(t.admit(fd, 1000 + static_cast<std::uint64_t>(round), "a"), verdict::admitted)
        << "round " << round;
    EXPECT_EQ(t.size(), 2u);
  }
  EXPECT_EQ(t.admit(99, 99, "a"), verdict::over_per_peer) << "both still open";
}

// A descriptor number that now holds another socket was closed in between, whoever took it.
TEST(connection_table, a_descriptor_holding_another_socket_was_closed) {
  fake_fds fds;
  connection_table t({.max_connections = 1, .max_per_peer = 1}, fds.probe());
  fds.open = {{10, 110}};
  EXPECT_EQ(t.admit(10, 110, "a"), verdict::admitted);
  fds.open[10] = 555;  // closed, and the number reused by something else (a Redis socket)
  fds.open[11] = 111;
  EXPECT_EQ(t.admit(11, 111, "b"), verdict::admitted);
  EXPECT_EQ(t.admit(12, 112, "c"), verdict::over_global);
}

}  // namespace
}  // namespace floodgate::service::envoy
