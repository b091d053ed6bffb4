// %XX decoding, for text that names things in URLs and names: the admin listener's query values
// (where '+' is a space) and Envoy rule names (envoy/envoy_rule_names.hpp, where it is itself);
// and the escaping those names and the Envoy service's counter keys are made with.
//
//   percent_decode("a%2Cb+c", plus_sign::space) == "a,b c"
//   percent_escape(out, "a,b%", ",");  // appends "a%2Cb%25"
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace floodgate::service {

enum class plus_sign { literal, space };

// `s` with each %XX decoded; nullopt when a '%' is not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s, plus_sign plus);

// Appends `s` to `out` with '%' and every byte in `specials` as %XX (upper-case hex), so that
// those bytes can separate the parts of a name and percent_decode() gives each part back.
void percent_escape(std::string& out, std::string_view s, std::string_view specials);

}  // namespace floodgate::service
