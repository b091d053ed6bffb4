// The heavy hitters of a stream of keys in fixed memory: the space-saving sketch (Metwally,
// Agrawal, El Abbadi, "Efficient computation of frequent and top-k elements in data streams",
// 2005).
//
//   space_saving s(64);
//   s.add("alice");  s.add("bob");  ...
//   for (const auto& e : s.top(10)) ...   // e.key, e.count, e.error
//
// It keeps `capacity` counters. A key already counted adds to its counter; a new key takes a
// free counter, or else replaces the key with the smallest count m and starts at m + 1
// (remembering error = m). Hence, after N additions:
//   - every counter overestimates: count - error <= true count <= count;
//   - error <= m_min <= N / capacity;
//   - every key whose true count exceeds N / capacity holds a counter (is reported).
// Memory: capacity entries (the key's bytes, two counts) and an index of 2 × capacity slots
// (rounded up to a power of two) and a min-heap of the counters (two 4-byte numbers each);
// nothing grows with the stream. Cost of add(): a hash, a probe and a heap step down from the
// key's counter (O(log capacity), short for a heavy hitter, which sits low); for a new key with
// the sketch full, the smallest counter is the heap's root. Not thread-safe: hot_keys.hpp
// locks around it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::service {

class space_saving {
 public:
  struct entry {
    std::string key;
    std::uint64_t count = 0;  // an upper bound of the key's true count
    std::uint64_t error = 0;  // count - error is a lower bound
  };

  explicit space_saving(std::size_t capacity);

  void add(std::string_view key, std::uint64_t weight = 1);
  // The counted keys, by count (largest first), at most n.
  std::vector<entry> top(std::size_t n) const;
  // The count of `key` if it holds a counter, else 0 (with found false).
  std::uint64_t count_of(std::string_view key, bool* found = nullptr) const;
  // The smallest count when every counter is in use (a key without a counter occurred at most
  // this often), else 0.
  std::uint64_t min_count() const noexcept;
  std::uint64_t total() const noexcept { return total_; }  // N: the weights added
  std::size_t capacity() const noexcept { return slots_.size(); }
  std::size_t size() const noexcept { return used_; }
  void clear() noexcept;

 private:
  struct slot {
    std::string key;
    std::uint64_t hash = 0;
    std::uint64_t error = 0;
  };
  // The index position holding `key`, or the empty one where it would go.
  std::size_t find(std::string_view key, std::uint64_t hash) const noexcept;
  void erase_at(std::size_t pos) noexcept;

  void sift_down(std::size_t i) noexcept;
  void sift_up(std::size_t i) noexcept;

  std::vector<slot> slots_;
  std::vector<std::uint64_t> counts_;  // by slot
  // A binary min-heap of the used slots by count: the smallest is heap_[0], found in O(1) and
  // replaced in O(log capacity) (a scan of every counter cost ~12 µs per new key at 4096).
  std::vector<std::uint32_t> heap_;     // slot numbers
  std::vector<std::uint32_t> heap_at_;  // by slot: its position in heap_
  std::size_t used_ = 0;
  std::vector<std::int32_t> index_;  // open addressing, linear probing; -1: empty
  std::uint64_t total_ = 0;
};

}  // namespace floodgate::service
