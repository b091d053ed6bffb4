#include "print_script.hpp"

#include <cstdio>

#include "floodgate/inspect.hpp"

namespace floodgate::bench {

int print_script(algorithm a) {
  const auto source = script_source(a);
  return std::fwrite(source.data(), 1, source.size(), stdout) == source.size() ? 0 : 1;
}

}  // namespace floodgate::bench
