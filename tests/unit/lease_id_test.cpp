// Lease ids are the capability to release or renew a slot: whoever knows one can free it. They
// must not be predictable from ids one can obtain oneself. Before, they came from a
// thread_local std::mt19937_64: its output is an invertible function of its state, so 312
// outputs (156 ids of one's own, acquired and released on one's own key) give the whole state
// and every later id — the victim's included (issue 28, item 3). These tests replay that attack
// against the semaphore (the first checks the attack itself, so the second cannot pass
// because the attack is broken), and check that a forked child does not repeat its parent's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/floodgate.hpp"
#include "memory/memory_backend.hpp"
#include "pipe_io.hpp"

namespace floodgate::test {
namespace {

using namespace std::chrono_literals;

// std::mt19937_64's parameters (C++ [rand.predef]).
constexpr int n = 312, m = 156;
constexpr std::uint64_t matrix_a = 0xB5026F5AA96619E9ULL;
constexpr std::uint64_t lower_mask = (std::uint64_t{1} << 31) - 1, upper_mask = ~lower_mask;

std::uint64_t temper(std::uint64_t y) {
  y ^= (y >> 29) & 0x5555555555555555ULL;
  y ^= (y << 17) & 0x71D67FFFEDA60000ULL;
  y ^= (y << 37) & 0xFFF7EEE000000000ULL;
  return y ^ (y >> 43);
}

// Each tempering step y ^= (y >> s) & mask is undone by iterating x = y ^ ((x >> s) & mask):
// every round fixes s more bits.
std::uint64_t undo_right(std::uint64_t y, int s, std::uint64_t mask) {
  std::uint64_t x = y;
  for (int i = 0; i < 64 / s + 1; ++i) x = y ^ ((x >> s) & mask);
  return x;
}
std::uint64_t undo_left(std::uint64_t y, int s, std::uint64_t mask) {
  std::uint64_t x = y;
  for (int i = 0; i < 64 / s + 1; ++i) x = y ^ ((x << s) & mask);
  return x;
}
std::uint64_t untemper(std::uint64_t y) {
  y = undo_right(y, 43, ~std::uint64_t{0});
  y = undo_left(y, 37, 0xFFF7EEE000000000ULL);
  y = undo_left(y, 17, 0x71D67FFFEDA60000ULL);
  return undo_right(y, 29, 0x5555555555555555ULL);
}

// The attacker's model of a generator: the last n untempered outputs (its state), from which
// the recurrence gives every later output.
class mt_predictor {
 public:
  // `outputs`: n consecutive outputs of the generator.
  explicit mt_predictor(const std::vector<std::uint64_t>& outputs) {
    for (const auto o : outputs) state_.push_back(untemper(o));
  }
  std::uint64_t next() {
    const auto k = state_.size() - n;
    const std::uint64_t y = (state_[k] & upper_mask) | (state_[k + 1] & lower_mask);
    const std::uint64_t x = state_[k + m] ^ (y >> 1) ^ ((y & 1) ? matrix_a : 0);
    state_.push_back(x);
    return temper(x);
  }

 private:
  std::vector<std::uint64_t> state_;
};

// The old id format: two outputs, each as 16 hex digits, least significant digit first.
std::array<std::uint64_t, 2> outputs_of(std::string_view id) {
  std::array<std::uint64_t, 2> v{};
  for (int half = 0; half < 2; ++half)
    for (int i = 15; i >= 0; --i) {
      const char c = id.at(static_cast<std::size_t>(16 * half + i));
      v[static_cast<std::size_t>(half)] =
          (v[static_cast<std::size_t>(half)] << 4) |
          static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
  return v;
}
std::string id_of(std::uint64_t first, std::uint64_t second) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i, first >>= 4, second >>= 4) {
    out[static_cast<std::size_t>(i)] = hex[first & 15];
    out[static_cast<std::size_t>(16 + i)] = hex[second & 15];
  }
  return out;
}

// The attack works: n outputs of a std::mt19937_64 seeded from the OS predict the next ones
// exactly, through the id format.
TEST(lease_ids, the_attack_predicts_a_mersenne_twister_from_its_outputs) {
  std::random_device rd;
  std::seed_seq seq{rd(), rd(), rd(), rd()};
  std::mt19937_64 rng(seq);
  std::vector<std::uint64_t> seen;
  for (int i = 0; i < n / 2; ++i) {
    const auto first = rng();  // in this order (a call's arguments are not sequenced)
    const auto [a, b] = outputs_of(id_of(first, rng()));
    seen.push_back(a);
    seen.push_back(b);
  }
  mt_predictor predict(seen);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(predict.next(), rng()) << "output " << i;
}

// The attack from issue 28 on the semaphore: 156 acquire/release pairs on the attacker's own
// key, then a guess at the victim's lease. Before: the guess was the victim's id, its release
// freed the victim's only slot and a second holder got it.
TEST(lease_ids, cannot_be_predicted_from_earlier_ids) {
  auto backend = std::make_shared<memory::memory_backend>(memory_options{});
  semaphore sem(*backend);
  const concurrency_policy one("one", 1, 1h);
  std::vector<std::uint64_t> seen;
  std::set<std::string> ids;
  for (int i = 0; i < n / 2; ++i) {
    const auto a = sem.acquire("attacker", one);
    ASSERT_EQ(a.outcome, outcome::allowed);
    ASSERT_EQ(a.lease.size(), 32u) << a.lease;
    ASSERT_EQ(a.lease.find_first_not_of("0123456789abcdef"), std::string::npos) << a.lease;
    ids.insert(a.lease);
    const auto [x, y] = outputs_of(a.lease);
    seen.push_back(x);
    seen.push_back(y);
    ASSERT_TRUE(sem.release("attacker", one, a.lease).done);
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(n / 2)) << "no id twice";

  const auto victim = sem.acquire("victim", one);
  ASSERT_EQ(victim.outcome, outcome::allowed);
  mt_predictor predict(seen);
  const auto first = predict.next();
  const auto guess = id_of(first, predict.next());
  EXPECT_NE(guess, victim.lease) << "the victim's lease id was predicted";
  EXPECT_FALSE(sem.release("victim", one, guess).done) << "the attacker freed the victim's slot";
  EXPECT_EQ(sem.acquire("victim", one).outcome, outcome::over_limit)
      << "a second holder got the victim's only slot";
}

// Any generator whose state lives in the process hands a forked child (a pre-forking server, a
// worker pool) the same ids as its parent: the next id of each is the same, and each can free
// the other's lease. Ids from the OS differ. Before: the same id in parent and child.
TEST(lease_ids, a_forked_child_does_not_repeat_its_parents_ids) {
  auto backend = std::make_shared<memory::memory_backend>(memory_options{});
  semaphore sem(*backend);
  const concurrency_policy many("many", 1000, 1h);
  ASSERT_EQ(sem.acquire("k", many).outcome, outcome::allowed);  // whatever state, in use
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    const auto a = sem.acquire("k", many);
    if (a.lease.size() != 32) ::_exit(2);
    write_all(fds[1], a.lease.data(), a.lease.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  const auto mine = sem.acquire("k", many);
  std::string childs(32, '\0');
  const bool read = read_all(fds[0], childs.data(), childs.size());
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(read && WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(mine.lease.size(), 32u);
  EXPECT_NE(mine.lease, childs) << "parent and child drew the same lease id";
}

}  // namespace
}  // namespace floodgate::test
