// %XX decoding, for text that names things in URLs and names: the admin listener's query values
// (where '+' is a space) and Envoy rule names (envoy/envoy_rule_names.hpp, where it is itself).
//
//   percent_decode("a%2Cb+c", plus_sign::space) == "a,b c"
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace floodgate::service {

enum class plus_sign { literal, space };

// `s` with each %XX decoded; nullopt when a '%' is not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s, plus_sign plus);

}  // namespace floodgate::service
