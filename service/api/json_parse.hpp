// JSON request bodies, parsed strictly: RFC 8259 lets a parser keep the last of duplicate member
// names, which is how {"rule": "api", ..., "rule": "global"} reaches one reader as "api" and
// another as "global". Here a duplicate is an error, at any depth.
//
//   boost::json::value v;
//   if (auto err = parse_json_strict(body, 4, v)) return bad_request(*err);
#pragma once

#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::service {

// Parses `text` (one JSON value, nothing after it but whitespace) into `out`, with at most
// `max_depth` levels of nesting. nullopt on success; otherwise what is wrong, e.g.
// "malformed JSON: incomplete JSON" or "duplicate field 'rule'".
std::optional<std::string> parse_json_strict(std::string_view text, std::size_t max_depth,
                                             boost::json::value& out);

}  // namespace floodgate::service
