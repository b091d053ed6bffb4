#include "telemetry/space_saving.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace floodgate::service {

space_saving::space_saving(std::size_t capacity)
    : slots_(capacity), counts_(capacity, 0), heap_(capacity, 0), heap_at_(capacity, 0) {
  if (capacity < 1 || capacity > (1u << 20))
    throw std::invalid_argument("space_saving: capacity must be 1 to 2^20");
  std::size_t n = 1;
  while (n < 2 * capacity) n *= 2;
  index_.assign(n, -1);
}

std::size_t space_saving::find(std::string_view key, std::uint64_t hash) const noexcept {
  const std::size_t mask = index_.size() - 1;
  for (std::size_t p = hash & mask;; p = (p + 1) & mask) {
    const auto s = index_[p];
    if (s < 0) return p;
    const auto& sl = slots_[static_cast<std::size_t>(s)];
    if (sl.hash == hash && sl.key == key) return p;
  }
}

// Backward-shift deletion: later entries of the probe run move into the hole when their home
// position allows it, so lookups never meet a gap inside a run.
void space_saving::erase_at(std::size_t pos) noexcept {
  const std::size_t mask = index_.size() - 1;
  std::size_t hole = pos;
  for (std::size_t q = (pos + 1) & mask; index_[q] >= 0; q = (q + 1) & mask) {
    const std::size_t home = slots_[static_cast<std::size_t>(index_[q])].hash & mask;
    // The entry at q may fill the hole if the hole lies in [home, q) cyclically.
    if (((q - hole) & mask) <= ((q - home) & mask)) {
      index_[hole] = index_[q];
      hole = q;
    }
  }
  index_[hole] = -1;
}

// The slot at heap position i moved to its place below it (its count grew).
void space_saving::sift_down(std::size_t i) noexcept {
  const std::size_t n = used_;
  const auto moving = heap_[i];
  const auto count = counts_[moving];
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && counts_[heap_[child + 1]] < counts_[heap_[child]]) ++child;
    if (counts_[heap_[child]] >= count) break;
    heap_[i] = heap_[child];
    heap_at_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = child;
  }
  heap_[i] = moving;
  heap_at_[moving] = static_cast<std::uint32_t>(i);
}

// The slot at heap position i moved to its place above it (a new, small count).
void space_saving::sift_up(std::size_t i) noexcept {
  const auto moving = heap_[i];
  const auto count = counts_[moving];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (counts_[heap_[parent]] <= count) break;
    heap_[i] = heap_[parent];
    heap_at_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = parent;
  }
  heap_[i] = moving;
  heap_at_[moving] = static_cast<std::uint32_t>(i);
}

void space_saving::add(std::string_view key, std::uint64_t weight) {
  total_ += weight;
  const std::uint64_t hash = std::hash<std::string_view>{}(key);
  const std::size_t pos = find(key, hash);
  if (index_[pos] >= 0) {
    const auto counted = static_cast<std::size_t>(index_[pos]);
    counts_[counted] += weight;
    sift_down(heap_at_[counted]);
    return;
  }
  if (used_ < slots_.size()) {
    auto& s = slots_[used_];
    s.key.assign(key);
    s.hash = hash;
    counts_[used_] = weight;
    s.error = 0;
    index_[pos] = static_cast<std::int32_t>(used_);
    heap_[used_] = static_cast<std::uint32_t>(used_);
    ++used_;
    sift_up(used_ - 1);
    return;
  }
  // Full: the key with the smallest count (the heap's root) gives up its counter.
  const std::size_t victim = heap_[0];
  auto& s = slots_[victim];
  erase_at(find(s.key, s.hash));
  const std::uint64_t m = counts_[victim];
  s.key.assign(key);  // reuses the string's capacity: no allocation once warm
  s.hash = hash;
  counts_[victim] = m + weight;
  s.error = m;
  index_[find(key, hash)] = static_cast<std::int32_t>(victim);
  sift_down(0);
}

std::vector<space_saving::entry> space_saving::top(std::size_t n) const {
  std::vector<std::size_t> order;
  order.reserve(used_);
  for (std::size_t i = 0; i < used_; ++i) order.push_back(i);
  const auto k = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [this](std::size_t a, std::size_t b) {
                      return counts_[a] != counts_[b] ? counts_[a] > counts_[b]
                                                      : slots_[a].key < slots_[b].key;
                    });
  std::vector<entry> out;
  out.reserve(k);
  for (std::size_t i = 0; i < k; ++i)
    out.push_back({slots_[order[i]].key, counts_[order[i]], slots_[order[i]].error});
  return out;
}

std::uint64_t space_saving::count_of(std::string_view key, bool* found) const {
  const auto pos = find(key, std::hash<std::string_view>{}(key));
  const bool hit = index_[pos] >= 0;
  if (found) *found = hit;
  return hit ? counts_[static_cast<std::size_t>(index_[pos])] : 0;
}

std::uint64_t space_saving::min_count() const noexcept {
  if (used_ < slots_.size()) return 0;
  return counts_[heap_[0]];
}

void space_saving::clear() noexcept {
  for (std::size_t i = 0; i < used_; ++i) {
    slots_[i].key.clear();
    slots_[i].error = 0;
    counts_[i] = 0;
  }
  used_ = 0;
  std::fill(index_.begin(), index_.end(), -1);
  total_ = 0;
}

}  // namespace floodgate::service
