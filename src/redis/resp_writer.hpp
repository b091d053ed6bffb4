// Encodes commands in RESP2 (an array of bulk strings) straight into a caller's buffer: no
// allocation beyond the buffer's own growth, binary-safe (CR, LF, NUL are just bytes).
//
//   std::string out;
//   append_command(out, {"SET", key, value});
//   // or, piece by piece when the arguments are not at hand as strings:
//   append_array_header(out, 3);
//   append_bulk(out, "INCRBY"); append_bulk(out, key); append_bulk(out, std::int64_t{5});
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace floodgate::redis {

// "*<n>\r\n": starts a command of n arguments.
void append_array_header(std::string& out, std::size_t n);
// "$<len>\r\n<bytes>\r\n".
void append_bulk(std::string& out, std::string_view bytes);
// "$<len>\r\n" alone, for a caller that then appends the len bytes itself and "\r\n".
void append_bulk_header(std::string& out, std::size_t len);
// An integer argument, in decimal.
void append_bulk(std::string& out, std::int64_t value);
// The size append_bulk adds for `len` bytes.
std::size_t bulk_size(std::size_t len) noexcept;

void append_command(std::string& out, std::initializer_list<std::string_view> args);

struct script;
enum class script_call : std::uint8_t;
// "FCALL <function>", "EVALSHA <sha1>" or "EVAL <source>": how a call of `s` sent as `form`
// starts, after its array header (scripts.hpp).
void append_script_head(std::string& out, const script& s, script_call form);

}  // namespace floodgate::redis
