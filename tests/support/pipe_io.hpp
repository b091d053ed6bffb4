// Whole-buffer reads and writes on a pipe, for tests whose forked children report back.
#pragma once

#include <unistd.h>

#include <cstddef>

namespace floodgate::test {

// Writes all n bytes; a child that cannot report exits with status 3.
inline void write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const auto w = ::write(fd, p, n);
    if (w <= 0) ::_exit(3);
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Reads exactly n bytes; false if the writer closed or failed first.
inline bool read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const auto r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace floodgate::test
