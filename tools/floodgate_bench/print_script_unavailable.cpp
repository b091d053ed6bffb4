// Built instead of print_script.cpp while libfloodgate has no embedded Lua scripts.
#include <cstdio>

#include "print_script.hpp"

namespace floodgate::bench {

int print_script(algorithm) {
  std::fprintf(stderr, "floodgate-bench: this build has no embedded Lua scripts\n");
  return 1;
}

}  // namespace floodgate::bench
