// A unified diff of two texts, line by line (as `diff -u` prints it): what `floodgate rules
// push` and `rollback` show before they change the rules in force. Pure.
//
//   std::cout << unified_diff(old_text, new_text, "prod@v3", "rules.yaml");
//   // --- prod@v3\n+++ rules.yaml\n@@ -4,3 +4,3 @@\n ...\n-    limit: 100\n+    limit: 200\n
//
// Empty when the texts are equal. Bounded: the common head and tail are set aside, and when
// what is left would take more than max_diff_cells of table, the diff says only how many lines
// each side has.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace floodgate::service {

inline constexpr std::size_t max_diff_cells = 4'000'000;

std::string unified_diff(std::string_view before, std::string_view after,
                         std::string_view before_name, std::string_view after_name,
                         std::size_t context = 3);

}  // namespace floodgate::service
