// What `floodgate rules ...` and `floodgate override ...` share: a subcommand named by the
// first argument, usage errors (exit 2, with the group's usage text) and failures (exit 1),
// and the URL#NAME both take.
//
//   return run_subcommand(argc, argv, "rules", rules_usage, {{"push", push}, {"show", show}});
#pragma once

#include <chrono>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/rules_store.hpp"

namespace floodgate::service::cli {

struct usage_failure {
  std::string message;
};
struct failure {
  std::string message;
};
[[noreturn]] inline void usage(const std::string& m) {
  throw usage_failure{m};
}
[[noreturn]] inline void fail(const std::string& m) {
  throw failure{m};
}

// Each Redis answer within 2 s: a person is waiting.
inline constexpr std::chrono::seconds store_timeout{2};

inline rules_ref parse_ref(std::string_view text) {
  try {
    return parse_rules_ref(text);
  } catch (const std::exception& e) {
    usage(e.what());
  }
}

using subcommand = int (*)(const std::vector<std::string_view>& args);

// argv[1] is the group; argv[2] the subcommand, given the arguments after it.
inline int run_subcommand(int argc, char** argv, std::string_view group, const char* usage_text,
                          std::initializer_list<std::pair<std::string_view, subcommand>> table) {
  std::vector<std::string_view> args(argv + 2, argv + argc);
  try {
    if (args.empty()) {
      std::string names;  // "a, b or c"
      std::size_t i = 0;
      for (const auto& [name, run] : table)
        names += (i++ == 0 ? "" : i == table.size() ? " or " : ", ") + std::string(name);
      usage(std::string(group) + " needs " + names);
    }
    const auto what = args.front();
    args.erase(args.begin());
    for (const auto& [name, run] : table)
      if (what == name) return run(args);
    if (what == "--help" || what == "-h") {
      std::fputs(usage_text, stdout);
      return 0;
    }
    usage("unknown " + std::string(group) + " command '" + std::string(what) + "'");
  } catch (const usage_failure& u) {
    std::fprintf(stderr, "floodgate: %s\n%s", u.message.c_str(), usage_text);
    return 2;
  } catch (const failure& f) {
    std::fflush(stdout);
    std::fprintf(stderr, "floodgate: %s\n", f.message.c_str());
    return 1;
  }
}

}  // namespace floodgate::service::cli
