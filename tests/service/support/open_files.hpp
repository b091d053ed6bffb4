// A running process's open-file limit, for tests of what happens when descriptors run out:
// lower it under a live floodgated (prlimit), then give the descriptors back.
//
//   set_open_file_limit(fg.pid(), limit_leaving(fg.pid(), 0));   // not one descriptor left
//   ... set_open_file_limit(fg.pid(), 100);
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>

namespace floodgate::test {

// The open-file limit under which `pid` has exactly `free` descriptor numbers left (the kernel
// hands out the lowest free number, and none at or above the limit).
inline rlim_t limit_leaving(pid_t pid, int free) {
  std::set<int> used;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    used.insert(std::stoi(e.path().filename().string()));
  int n = 0;
  for (int left = free; used.count(n) || left-- > 0;) ++n;
  return static_cast<rlim_t>(n);
}

// Sets `pid`'s soft open-file limit; throws if it cannot.
inline void set_open_file_limit(pid_t pid, rlim_t soft) {
  rlimit now{};
  if (::prlimit(pid, RLIMIT_NOFILE, nullptr, &now) == 0) {
    now.rlim_cur = soft;
    if (::prlimit(pid, RLIMIT_NOFILE, &now, nullptr) == 0) return;
  }
  throw std::runtime_error(std::string("prlimit: ") + std::strerror(errno));
}

}  // namespace floodgate::test
