#include "http_reply_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace floodgate::bench {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

http_reply_reader::state http_reply_reader::fail(std::string why) {
  error_ = std::move(why);
  return state_ = state::error;
}

http_reply_reader::state http_reply_reader::feed(std::string_view bytes) {
  if (state_ != state::need_more) {
    excess_ += bytes.size();
    return state_;
  }
  buffer_.append(bytes);
  if (!head_done_) {
    const auto end = buffer_.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (buffer_.size() > max_head)
        return fail("response head over " + std::to_string(max_head) + " bytes");
      return state_;
    }
    if (parse_head(std::string_view(buffer_).substr(0, end)) == state::error) return state_;
    buffer_.erase(0, end + 4);
    head_done_ = true;
  }
  if (buffer_.size() < body_length_) return state_;
  excess_ = buffer_.size() - body_length_;
  body_ = buffer_.substr(0, body_length_);
  buffer_.clear();
  return state_ = state::complete;
}

http_reply_reader::state http_reply_reader::parse_head(std::string_view head) {
  const auto line_end = head.find("\r\n");
  const auto status_line = head.substr(0, line_end);
  // "HTTP/1.1 200 OK"
  if (status_line.substr(0, 7) != "HTTP/1." || status_line.size() < 12 || status_line[8] != ' ')
    return fail("bad status line '" + std::string(status_line.substr(0, 64)) + "'");
  const auto code = status_line.substr(9, 3);
  auto [p, ec] = std::from_chars(code.data(), code.data() + 3, status_);
  if (ec != std::errc{} || p != code.data() + 3) return fail("bad status code");
  keep_alive_ = status_line[7] == '1';  // HTTP/1.0 closes unless told otherwise

  bool have_length = false;
  std::string_view rest = line_end == std::string_view::npos ? "" : head.substr(line_end + 2);
  while (!rest.empty()) {
    const auto eol = rest.find("\r\n");
    const auto line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? "" : rest.substr(eol + 2);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return fail("bad header line");
    const auto name = trim(line.substr(0, colon));
    const auto value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      auto [q, lec] = std::from_chars(value.data(), value.data() + value.size(), body_length_);
      if (lec != std::errc{} || q != value.data() + value.size()) return fail("bad Content-Length");
      if (body_length_ > max_body) return fail("body over " + std::to_string(max_body) + " bytes");
      have_length = true;
    } else if (iequals(name, "transfer-encoding")) {
      return fail("chunked responses are not supported");
    } else if (iequals(name, "connection")) {
      if (iequals(value, "close"))
        keep_alive_ = false;
      else if (iequals(value, "keep-alive"))
        keep_alive_ = true;
    }
  }
  // 1xx, 204 and 304 have no body; anything else must say how long it is.
  if (!have_length && !(status_ / 100 == 1 || status_ == 204 || status_ == 304))
    return fail("response without Content-Length");
  return state_;
}

}  // namespace floodgate::bench
