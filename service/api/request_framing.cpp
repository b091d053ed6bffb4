#include "api/request_framing.hpp"

#include "api/render.hpp"

namespace floodgate::service {

std::optional<http_response> check_framing(
    unsigned version, std::size_t host_fields,
    const std::vector<std::string_view>& transfer_encodings) {
  if (host_fields > 1) return error_response(400, "more than one Host header");
  if (version >= 11 && host_fields == 0)
    return error_response(400, "an HTTP/1.1 request needs a Host header");

  // The codings, in the order applied; each without parameters, lower-cased.
  std::size_t codings = 0;
  std::size_t chunked_at = 0;  // 1-based position of the last "chunked", 0 if none
  bool other = false;
  for (auto value : transfer_encodings) {
    while (!value.empty()) {
      const auto comma = value.find(',');
      auto coding = value.substr(0, value.find_first_of(",;"));
      value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
      while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t'))
        coding.remove_prefix(1);
      while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
        coding.remove_suffix(1);
      if (coding.empty()) continue;
      ++codings;
      if (same_header_name(coding, "chunked")) {
        if (chunked_at != 0)
          return error_response(400, "Transfer-Encoding applies chunked more than once");
        chunked_at = codings;
      } else {
        other = true;
      }
    }
  }
  if (codings == 0) {
    if (!transfer_encodings.empty()) return error_response(400, "empty Transfer-Encoding");
    return std::nullopt;
  }
  if (chunked_at != codings)
    return error_response(400,
                          "Transfer-Encoding must end with chunked (the body's length is "
                          "unknown otherwise)");
  if (other) return error_response(501, "unsupported Transfer-Encoding: only chunked is decoded");
  return std::nullopt;
}

refused_version reread_version(std::string_view head) {
  const auto end = head.find("\r\n");
  if (end == std::string_view::npos) return {};
  const auto line = head.substr(0, end);
  const auto space = line.rfind(' ');
  if (space == std::string_view::npos) return {};
  const auto v = line.substr(space + 1);
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (v.size() != 8 || !v.starts_with("HTTP/") || !digit(v[5]) || v[6] != '.' || !digit(v[7]))
    return {};
  if (v[5] != '1') return {refused_version::verdict::not_supported, 0};
  if (v[7] < '2') return {};  // 1.0 and 1.1 were not refused for their version
  return {refused_version::verdict::serve_as_1_1, space + 1 + 7};
}

std::optional<absolute_target> from_absolute_form(std::string_view target) {
  std::string_view rest;
  for (std::string_view scheme : {"http://", "https://"})
    if (target.size() > scheme.size() && same_header_name(target.substr(0, scheme.size()), scheme))
      rest = target.substr(scheme.size());
  if (rest.empty()) return std::nullopt;
  const auto end = rest.find_first_of("/?#");
  absolute_target out;
  out.authority = rest.substr(0, end);
  if (out.authority.empty()) return std::nullopt;
  const auto path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (!path.starts_with('/')) out.target = "/";
  out.target.append(path);
  return out;
}

}  // namespace floodgate::service
