// Reads one HTTP/1.1 response from bytes as they arrive (no I/O here: the HTTP target feeds
// it what recv() returned). Handles Content-Length bodies, which is what floodgated sends;
// chunked or unbounded bodies are refused. Sizes are capped.
//
//   http_reply_reader r;
//   while (r.feed(bytes) == http_reply_reader::state::need_more) bytes = recv(...);
//   if (r.status() == 200) ...
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace floodgate::bench {

class http_reply_reader {
 public:
  enum class state { need_more, complete, error };
  static constexpr std::size_t max_head = 16 * 1024;
  static constexpr std::size_t max_body = 1024 * 1024;

  // Appends bytes; sticky once complete or in error. Bytes after a complete response are kept
  // in `excess()` (a server that sends more than it was asked is a protocol error for us).
  state feed(std::string_view bytes);

  state current() const noexcept { return state_; }
  int status() const noexcept { return status_; }
  std::string_view body() const noexcept { return body_; }
  bool keep_alive() const noexcept { return keep_alive_; }
  const std::string& error() const noexcept { return error_; }
  std::size_t excess() const noexcept { return excess_; }
  void reset() { *this = http_reply_reader{}; }

 private:
  state fail(std::string why);
  state parse_head(std::string_view head);

  state state_ = state::need_more;
  std::string buffer_;
  bool head_done_ = false;
  std::size_t body_length_ = 0;
  int status_ = 0;
  bool keep_alive_ = true;
  std::string body_;
  std::string error_;
  std::size_t excess_ = 0;
};

}  // namespace floodgate::bench
