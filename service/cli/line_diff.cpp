#include "cli/line_diff.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace floodgate::service {
namespace {

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const auto nl = s.find('\n');
    out.push_back(s.substr(0, nl));
    s = nl == std::string_view::npos ? std::string_view{} : s.substr(nl + 1);
  }
  return out;
}

struct op {
  char kind;         // ' ', '-', '+'
  std::size_t a, b;  // line numbers (0-based) before the op in each text
  std::string_view line;
};

}  // namespace

std::string unified_diff(std::string_view before, std::string_view after,
                         std::string_view before_name, std::string_view after_name,
                         std::size_t context) {
  if (before == after) return {};
  const auto a = split_lines(before), b = split_lines(after);
  std::size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  std::size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head &&
         a[a.size() - 1 - tail] == b[b.size() - 1 - tail])
    ++tail;
  const std::size_t n = a.size() - head - tail, m = b.size() - head - tail;
  std::string out = "--- " + std::string(before_name) + "\n+++ " + std::string(after_name) + "\n";
  if ((n + 1) * (m + 1) > max_diff_cells)
    return out + "(too large to diff here: " + std::to_string(a.size()) + " lines -> " +
           std::to_string(b.size()) + " lines)\n";
  // lcs[i][j]: the longest common subsequence of the middles' suffixes from i and j.
  std::vector<std::uint32_t> lcs((n + 1) * (m + 1), 0);
  auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return lcs[i * (m + 1) + j]; };
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      at(i, j) =
          a[head + i] == b[head + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
  std::vector<op> ops;
  for (std::size_t k = 0; k < head; ++k) ops.push_back({' ', k, k, a[k]});
  std::size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[head + i] == b[head + j]) {
      ops.push_back({' ', head + i, head + j, a[head + i]});
      ++i, ++j;
    } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
      ops.push_back({'-', head + i, head + j, a[head + i]});  // removals first, as diff -u
      ++i;
    } else {
      ops.push_back({'+', head + i, head + j, b[head + j]});
      ++j;
    }
  }
  for (std::size_t k = 0; k < tail; ++k)
    ops.push_back({' ', head + n + k, head + m + k, a[head + n + k]});
  // Hunks: each change with `context` unchanged lines around it, near ones merged.
  std::size_t k = 0;
  while (k < ops.size()) {
    while (k < ops.size() && ops[k].kind == ' ') ++k;
    if (k == ops.size()) break;
    std::size_t start = k > context ? k - context : 0, end = k;
    for (;;) {
      while (end < ops.size() && ops[end].kind != ' ') ++end;
      std::size_t same = end;
      while (same < ops.size() && ops[same].kind == ' ' && same - end < 2 * context + 1) ++same;
      if (same < ops.size() && ops[same].kind != ' ') {
        end = same;
        continue;
      }
      end = std::min(ops.size(), end + context);
      break;
    }
    std::size_t a_count = 0, b_count = 0;
    for (std::size_t x = start; x < end; ++x) {
      if (ops[x].kind != '+') ++a_count;
      if (ops[x].kind != '-') ++b_count;
    }
    const auto a_from = ops[start].a + (a_count ? 1 : 0), b_from = ops[start].b + (b_count ? 1 : 0);
    out += "@@ -" + std::to_string(a_from) + "," + std::to_string(a_count) + " +" +
           std::to_string(b_from) + "," + std::to_string(b_count) + " @@\n";
    for (std::size_t x = start; x < end; ++x) {
      out += ops[x].kind;
      out += ops[x].line;
      out += '\n';
    }
    k = end;
  }
  return out;
}

}  // namespace floodgate::service
