// docs/library.md shows compiled code only: each ```cpp block placed after a line
// "<!-- excerpt: path -->" must appear, line for line (indentation aside), in that file, which
// the build compiles (examples/, tests/install/consumer/).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "child_process.hpp"

namespace floodgate::test {
namespace {

std::vector<std::string> trimmed_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line.substr(std::min(line.find_first_not_of(' '), line.size())));
  return out;
}

bool contains_block(const std::vector<std::string>& file, const std::vector<std::string>& block) {
  if (block.empty() || block.size() > file.size()) return false;
  for (std::size_t i = 0; i + block.size() <= file.size(); ++i)
    if (std::equal(block.begin(), block.end(), file.begin() + static_cast<std::ptrdiff_t>(i)))
      return true;
  return false;
}

TEST(library_docs, every_code_block_is_an_excerpt_of_a_compiled_file) {
  const auto doc = trimmed_lines(read_file(FLOODGATE_SOURCE_DIR "/docs/library.md"));
  const std::string marker = "<!-- excerpt: ";
  int blocks = 0;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    if (doc[i] != "```cpp") continue;
    ASSERT_GT(i, 0u);
    ASSERT_EQ(doc[i - 1].rfind(marker, 0), 0u) << "line " << i << ": a cpp block without a source";
    const std::string path =
        doc[i - 1].substr(marker.size(), doc[i - 1].find(" -->") - marker.size());
    std::vector<std::string> block;
    for (++i; i < doc.size() && doc[i] != "```"; ++i) block.push_back(doc[i]);
    EXPECT_TRUE(contains_block(trimmed_lines(read_file(FLOODGATE_SOURCE_DIR "/" + path)), block))
        << "docs/library.md: a block is not in " << path;
    ++blocks;
  }
  EXPECT_GE(blocks, 4);
}

}  // namespace
}  // namespace floodgate::test
