// The fuzz targets' entry functions: arbitrary bytes in, return normally or abort.
//
// Each is one parser that sees untrusted bytes, driven the way floodgate drives it, plus the
// properties it must keep (an abort with a message is a finding). The same functions run under
// libFuzzer (fuzz_main.cpp, clang, scripts/fuzz) and in the normal suite over the seed corpora
// and every regression input (regression_test.cpp, any compiler):
//
//   floodgate::fuzz::resp_reader(bytes);   // or by name: find_target("resp_reader")->run(bytes)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace floodgate::fuzz {

using bytes = std::span<const std::uint8_t>;

// RESP replies from Redis (src/redis/resp_reader), fed in pieces and whole.
void resp_reader(bytes data);
// Raw HTTP requests through Beast's parser and the pure handler (service/route, render).
void http_request(bytes data);
// A rules file (service/config's parse_config).
void rules_yaml(bytes data);
// A backend URL with its query options (src/redis/url*, topology).
void redis_url(bytes data);

struct target {
  std::string_view name;
  void (*run)(bytes);
};
inline constexpr target targets[] = {
    {"resp_reader", resp_reader},
    {"http_request", http_request},
    {"rules_yaml", rules_yaml},
    {"redis_url", redis_url},
};

// Stops the process with `what` (and the input being replayed, if known) when `ok` is false.
void require(bool ok, std::string_view what);

// The file being replayed, named in require()'s message (regression_test.cpp sets it).
void set_current_input(std::string_view name);

}  // namespace floodgate::fuzz
