#include "print_script.hpp"

#include <cstdio>

#include "floodgate/inspect.hpp"

namespace floodgate::bench {

namespace {

int print(std::string_view source) {
  return std::fwrite(source.data(), 1, source.size(), stdout) == source.size() ? 0 : 1;
}

}  // namespace

int print_script(algorithm a) {
  return print(script_source(a));
}

int print_library() {
  return print(script_library_source());
}

}  // namespace floodgate::bench
