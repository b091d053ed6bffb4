// Parses RESP2 replies from bytes: a thin wrapper over hiredis's redisReader, which does no
// I/O. The connection feeds it what the socket read and asks for complete replies, so the
// parser is tested on bytes alone (split anywhere, corrupted, nested).
//
//   resp_reader r{1 << 20};
//   r.feed(bytes);
//   reply rep;
//   while (r.next(rep) == resp_reader::result::ready) handle(std::move(rep));
//   if (r.failed()) drop_connection();
//
// Caps: a reply may take at most `max_reply_size` bytes on the wire (counting what it has
// consumed so far and what is buffered behind it), and nest at most 8 arrays deep (hiredis
// 0.14's own cap: "depth > 7" below the outermost). Breaking either, or any malformed byte, is a
// sticky error: the stream cannot be resynchronised, so the connection must be dropped.
//
// Not thread-safe; one per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "redis/reply.hpp"

struct redisReader;

namespace floodgate::redis {

class resp_reader {
 public:
  explicit resp_reader(std::size_t max_reply_size);
  ~resp_reader();
  resp_reader(const resp_reader&) = delete;
  resp_reader& operator=(const resp_reader&) = delete;

  // Appends bytes read from the connection. Ignored once failed().
  void feed(std::string_view bytes);

  enum class result { ready, need_more, error };
  // Takes the next complete reply into `out` (result::ready), or says why there is none.
  result next(reply& out);

  bool failed() const noexcept { return !error_.empty(); }
  // What went wrong, for diagnostics; empty unless failed().
  const std::string& error_message() const noexcept { return error_; }

 private:
  friend struct reader_callbacks;

  void fail(std::string message);
  result too_big();

  redisReader* reader_;
  std::size_t max_reply_size_;
  std::uint64_t fed_ = 0;          // bytes fed since construction
  std::uint64_t reply_begin_ = 0;  // stream offset where the reply being parsed starts
  std::size_t elements_ = 0;       // array elements announced so far by that reply
  std::string error_;
};

}  // namespace floodgate::redis
