// --print-script ALGO: writes the exact Lua text floodgate sends with SCRIPT LOAD for ALGO, so
// bench/compare can load the very same script into redis-benchmark (`redis-cli -x SCRIPT LOAD`).
// Returns the exit code.
#pragma once

#include "floodgate/policy.hpp"

namespace floodgate::bench {

int print_script(algorithm a);
// --print-library: the same for the function library (`redis-cli -x FUNCTION LOAD`).
int print_library();

}  // namespace floodgate::bench
