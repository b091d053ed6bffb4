// Replays every seed corpus and every input a fuzzer ever broke something with
// (tests/fuzz/corpus/TARGET, tests/fuzz/regressions/TARGET) through the same entry functions
// the fuzzers run, so the normal suite (and its ASan+UBSan lane) keeps them fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz_entries.hpp"

namespace floodgate::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "README.md") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

class fuzz_inputs : public ::testing::TestWithParam<target> {};

TEST_P(fuzz_inputs, replay_without_a_finding) {
  const fs::path root = FLOODGATE_FUZZ_DIR;
  const auto corpus = files_in(root / "corpus" / GetParam().name);
  ASSERT_FALSE(corpus.empty()) << "no seed corpus for " << GetParam().name;
  auto inputs = corpus;
  const auto regressions = files_in(root / "regressions" / GetParam().name);
  inputs.insert(inputs.end(), regressions.begin(), regressions.end());
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path;
    const std::vector<std::uint8_t> data{std::istreambuf_iterator<char>(in), {}};
    set_current_input(path.string());
    GetParam().run(data);  // aborts, naming the input, on a finding
  }
  set_current_input("");
}

INSTANTIATE_TEST_SUITE_P(targets, fuzz_inputs, ::testing::ValuesIn(targets),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace floodgate::fuzz
