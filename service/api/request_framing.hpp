// What a request's header says about where it ends and whom it is for, checked before its body
// is read (RFC 9112): a request we cannot frame is refused and its connection closed, since
// where the next request starts is unknown.
//
//   if (auto refusal = check_framing(11, host_values, te_lines)) respond(*refusal, close);
//   if (reread_version(bytes).what == refused_version::verdict::serve_as_1_1) ...
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_message.hpp"

namespace floodgate::service {

// version: 10 or 11; hosts: every Host line's value; transfer_encodings: every
// Transfer-Encoding line's value, in order. Refuses with
//   400 an HTTP/1.1 request without Host, or any request with more than one, or one whose value
//       is not a host (RFC 9112 3.2, RFC 9110 7.2: valid_host below);
//   400 a Transfer-Encoding whose last coding is not chunked: the body's length is unknown
//       (RFC 9112 6.3);
//   501 chunked after another coding (gzip, chunked): a coding we do not decode (RFC 9112 6.1).
std::optional<http_response> check_framing(unsigned version,
                                           const std::vector<std::string_view>& hosts,
                                           const std::vector<std::string_view>& transfer_encodings);

// Whether `value` is a Host field value: uri-host [ ":" port ] (RFC 9110 7.2, RFC 3986 3.2.2):
// a reg-name (unreserved, pct-encoded and sub-delims characters: names and IPv4 addresses) or
// an IP-literal in brackets (an IPv6 address, or IPvFuture), then optionally ':' and a port of
// at most 5 digits, at most 65535. Empty is valid (a target with no authority).
bool valid_host(std::string_view value) noexcept;

// A request line whose version the parser refused (it takes 1.0 and 1.1 only), read again.
// RFC 9110 2.5: a 1.x of a minor version we do not know is served as 1.1, the highest we
// speak; another major version is 505. `head` is the buffered request from its first byte.
struct refused_version {
  enum class verdict {
    malformed,      // not "HTTP/d.d" at the line's end: stays a 400
    serve_as_1_1,   // HTTP/1.2 .. HTTP/1.9: head[minor_at] is the digit to read as '1'
    not_supported,  // HTTP/0.x, HTTP/2.0 .. HTTP/9.9 in HTTP/1 syntax: 505
  };
  verdict what = verdict::malformed;
  std::size_t minor_at = 0;
};
refused_version reread_version(std::string_view head);

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
