// libFuzzer's entry point for one target, chosen at build time (FLOODGATE_FUZZ_ENTRY).
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FLOODGATE_FUZZ_ENTRY(floodgate::fuzz::bytes(data, size));
  return 0;
}
