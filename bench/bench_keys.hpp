// The caller keys the micro-benchmarks cycle through: 1000 users, so state is spread over
// many keys (and shards) the way a real load spreads it.
#pragma once

#include <string>
#include <vector>

namespace floodgate::bench {

inline const std::vector<std::string>& user_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (int i = 0; i < 1000; ++i) out.push_back("user" + std::to_string(i));
    return out;
  }();
  return keys;
}

}  // namespace floodgate::bench
