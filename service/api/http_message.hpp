// The service's own small HTTP request and response: what the pure handler sees and returns.
//
// The server converts Beast's messages to and from these, so the handler, its tests and
// everything else here build without Beast (one TU with Beast costs ~20 s of compile time).
//
//   http_request req{"POST", "/v1/check", {{"Content-Type", "application/json"}}, body, ip};
//   http_response res = ...;
//   res.header("Retry-After");  // case-insensitive, first match
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace floodgate::service {

using header_list = std::vector<std::pair<std::string, std::string>>;

// Whether two header names are the same (ASCII case-insensitive).
bool same_header_name(std::string_view a, std::string_view b) noexcept;

// Finds a header by name, case-insensitively; the first one wins.
std::optional<std::string_view> find_header(const header_list& headers, std::string_view name);

// Whether a header appears more than once. A header that names one thing (X-Real-IP, a key)
// given twice is ambiguous, and the first line may be the client's own.
bool repeated_header(const header_list& headers, std::string_view name) noexcept;

struct http_request {
  std::string method;   // "GET", "POST", ... as received
  std::string target;   // origin-form: path and optional "?query"
  header_list headers;  // as received, in order
  std::string body;
  std::string peer_address;  // the TCP peer, e.g. "127.0.0.1"

  std::optional<std::string_view> header(std::string_view name) const {
    return find_header(headers, name);
  }
  bool repeats(std::string_view name) const noexcept { return repeated_header(headers, name); }
};

struct http_response {
  int status = 200;
  header_list headers;  // Content-Length and Connection are the server's business
  std::string body;

  std::optional<std::string_view> header(std::string_view name) const {
    return find_header(headers, name);
  }
};

}  // namespace floodgate::service
