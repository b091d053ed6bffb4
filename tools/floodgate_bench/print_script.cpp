// The one place the bench reaches past the public API: the script text is internal
// (src/redis/scripts.hpp), and the tool is built in-tree, so it links it for this flag only.
#include "print_script.hpp"

#include <cstdio>

#include "redis/scripts.hpp"

namespace floodgate::bench {

int print_script(algorithm a) {
  const auto source = redis::script_for(a).source;
  return std::fwrite(source.data(), 1, source.size(), stdout) == source.size() ? 0 : 1;
}

}  // namespace floodgate::bench
