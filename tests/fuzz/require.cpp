#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_entries.hpp"

namespace floodgate::fuzz {
namespace {
std::string current_input;
}  // namespace

void set_current_input(std::string_view name) {
  current_input = name;
}

void require(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property broken: %.*s%s%s\n", static_cast<int>(what.size()),
               what.data(), current_input.empty() ? "" : "\n  input: ", current_input.c_str());
  std::abort();
}

}  // namespace floodgate::fuzz
