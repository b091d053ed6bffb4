// What a request's header says about where it ends and whom it is for, checked before its body
// is read (RFC 9112): a request we cannot frame is refused and its connection closed, since
// where the next request starts is unknown.
//
//   if (auto refusal = check_framing(11, host_lines, te_lines)) respond(*refusal, close);
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_message.hpp"

namespace floodgate::service {

// version: 10 or 11; host_fields: how many Host lines; transfer_encodings: every
// Transfer-Encoding line's value, in order. Refuses with
//   400 an HTTP/1.1 request without Host, or any request with more than one (RFC 9112 3.2);
//   400 a Transfer-Encoding whose last coding is not chunked: the body's length is unknown
//       (RFC 9112 6.3);
//   501 chunked after another coding (gzip, chunked): a coding we do not decode (RFC 9112 6.1).
std::optional<http_response> check_framing(unsigned version, std::size_t host_fields,
                                           const std::vector<std::string_view>& transfer_encodings);

// An absolute-form target (RFC 9112 3.2.2: "http://host:port/path?query", scheme in any case;
// a server MUST accept it) as the origin-form the handler routes ("/path?query", "/" for an
// empty path) and its authority ("host:port"), which an origin server uses instead of Host.
// nullopt for any other target (origin-form, "*", or an authority that is empty).
struct absolute_target {
  std::string target;
  std::string_view authority;
};
std::optional<absolute_target> from_absolute_form(std::string_view target);

}  // namespace floodgate::service
