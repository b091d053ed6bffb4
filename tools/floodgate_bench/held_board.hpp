// How many leases of each key the bench holds at once, across its worker processes: one pair
// of counters per key (held now, most held) in memory shared by the processes forked after
// it is made.
//
//   held_board board(opts.keys);   // in the parent, before fork()
//   board.enter(k);                // a worker: the acquire's reply granted a lease of key k
//   board.leave(k);                // a worker: about to send its release
//   board.max_held();              // the parent, after the run
//
// Counted from the acquire's reply to the release's send, a lease is inside the interval in
// which Redis holds it (unless it expires while held), so the counts are never above what
// Redis held: a maximum above the limit is a bug.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace floodgate::bench {

class held_board {
 public:
  // Throws std::runtime_error if the shared memory cannot be mapped.
  explicit held_board(std::size_t keys);
  ~held_board();
  held_board(const held_board&) = delete;
  held_board& operator=(const held_board&) = delete;

  void enter(std::size_t key) noexcept;
  void leave(std::size_t key) noexcept;

  std::size_t keys() const noexcept { return keys_; }
  std::int64_t max_held(std::size_t key) const noexcept;
  std::int64_t max_held() const noexcept;  // over every key
  // Keys whose maximum reached `n` (>= n).
  std::size_t keys_reaching(std::int64_t n) const noexcept;

 private:
  struct cell {
    std::atomic<std::int64_t> held;
    std::atomic<std::int64_t> max;
  };
  // Shared between processes only if lock-free (no lock lives in the other process).
  static_assert(std::atomic<std::int64_t>::is_always_lock_free);

  std::size_t keys_;
  std::size_t bytes_;
  cell* cells_;
};

}  // namespace floodgate::bench
