#include "redis/resp_writer.hpp"

#include <charconv>

#include "redis/scripts.hpp"

namespace floodgate::redis {
namespace {

void append_prefixed(std::string& out, char prefix, std::uint64_t n) {
  char buf[24];
  buf[0] = prefix;
  auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
  (void)ec;  // 20 digits always fit
  *end++ = '\r';
  *end++ = '\n';
  out.append(buf, end);
}

std::size_t digits(std::size_t n) noexcept {
  std::size_t d = 1;
  for (; n >= 10; n /= 10) ++d;
  return d;
}

}  // namespace

void append_array_header(std::string& out, std::size_t n) {
  append_prefixed(out, '*', n);
}

void append_bulk_header(std::string& out, std::size_t len) {
  append_prefixed(out, '$', len);
}

void append_bulk(std::string& out, std::string_view bytes) {
  append_prefixed(out, '$', bytes.size());
  out.append(bytes);
  out.append("\r\n");
}

void append_bulk(std::string& out, std::int64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  append_bulk(out, std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

std::size_t bulk_size(std::size_t len) noexcept {
  return 1 + digits(len) + 2 + len + 2;
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  std::size_t size = 1 + digits(args.size()) + 2;
  for (auto a : args) size += bulk_size(a.size());
  out.reserve(out.size() + size);
  append_array_header(out, args.size());
  for (auto a : args) append_bulk(out, a);
}

void append_script_head(std::string& out, const script& s, script_call form) {
  switch (form) {
    case script_call::fcall:
      append_bulk(out, "FCALL");
      return append_bulk(out, s.function);
    case script_call::evalsha:
      append_bulk(out, "EVALSHA");
      return append_bulk(out, s.sha1);
    case script_call::eval:
      append_bulk(out, "EVAL");
      return append_bulk(out, s.source);
  }
}

}  // namespace floodgate::redis
