#include "held_board.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace floodgate::bench {

held_board::held_board(std::size_t keys)
    : keys_(keys), bytes_(std::max<std::size_t>(1, keys) * sizeof(cell)) {
  // Anonymous shared pages start zeroed: every counter starts at 0.
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error(std::string("held board: mmap: ") + std::strerror(errno));
  cells_ = static_cast<cell*>(p);
  for (std::size_t k = 0; k < keys_; ++k) new (&cells_[k]) cell{{0}, {0}};
}

held_board::~held_board() {
  ::munmap(cells_, bytes_);
}

void held_board::enter(std::size_t key) noexcept {
  auto& c = cells_[key];
  const auto now = c.held.fetch_add(1) + 1;
  auto seen = c.max.load();
  while (seen < now && !c.max.compare_exchange_weak(seen, now)) {
  }
}

void held_board::leave(std::size_t key) noexcept {
  cells_[key].held.fetch_sub(1);
}

std::int64_t held_board::max_held(std::size_t key) const noexcept {
  return cells_[key].max.load();
}

std::int64_t held_board::max_held() const noexcept {
  std::int64_t m = 0;
  for (std::size_t k = 0; k < keys_; ++k) m = std::max(m, cells_[k].max.load());
  return m;
}

std::size_t held_board::keys_reaching(std::int64_t n) const noexcept {
  std::size_t count = 0;
  for (std::size_t k = 0; k < keys_; ++k) count += cells_[k].max.load() >= n;
  return count;
}

}  // namespace floodgate::bench
