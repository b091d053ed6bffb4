// RESP from Redis: the bytes a connection reads, fed to resp_reader as the socket would (in
// pieces of any size) and all at once. Properties: both ways yield the same replies and the
// same final state; no reply exceeds the cap; failures are sticky.
#include <string>
#include <vector>

#include "fuzz_entries.hpp"
#include "redis/resp_reader.hpp"

namespace floodgate::fuzz {
namespace {

using redis::reply;

// The shortest RESP2 encoding of a reply: never longer than what it was parsed from.
void encode(const reply& r, std::string& out, int depth, int& max_depth) {
  max_depth = std::max(max_depth, depth);
  switch (r.kind) {
    case reply::type::nil:
      out += "$-1\r\n";
      break;
    case reply::type::status:
      out += "+" + r.str + "\r\n";
      break;
    case reply::type::error:
      out += "-" + r.str + "\r\n";
      break;
    case reply::type::integer:
      out += ":" + std::to_string(r.integer) + "\r\n";
      break;
    case reply::type::string:
      out += "$" + std::to_string(r.str.size()) + "\r\n" + r.str + "\r\n";
      break;
    case reply::type::array:
      out += "*" + std::to_string(r.elements.size()) + "\r\n";
      for (const auto& e : r.elements) encode(e, out, depth + 1, max_depth);
      break;
  }
}

struct outcome {
  std::vector<std::string> replies;  // encoded
  bool failed = false;
};

outcome read_all(std::string_view stream, std::size_t cap, std::size_t piece) {
  redis::resp_reader reader{cap};
  outcome out;
  auto drain = [&] {
    reply r;
    for (;;) {
      const auto res = reader.next(r);
      if (res != redis::resp_reader::result::ready) {
        require((res == redis::resp_reader::result::error) == reader.failed(),
                "next() says error exactly when failed()");
        return;
      }
      std::string encoded;
      int depth = 0;
      encode(r, encoded, 0, depth);
      require(encoded.size() <= cap, "a reply larger than max_reply_size was returned");
      require(depth <= 8, "a reply nested deeper than the documented cap was returned");
      out.replies.push_back(std::move(encoded));
    }
  };
  for (std::size_t at = 0; at < stream.size() && !reader.failed(); at += piece) {
    reader.feed(stream.substr(at, piece));
    drain();
  }
  out.failed = reader.failed();
  if (out.failed) {
    require(!reader.error_message().empty(), "failed without a message");
    reply r;
    require(reader.next(r) == redis::resp_reader::result::error, "a failure is not sticky");
    reader.feed("+OK\r\n");
    require(reader.next(r) == redis::resp_reader::result::error, "feed() after failure parsed");
  }
  return out;
}

}  // namespace

void resp_reader(bytes data) {
  if (data.size() < 2) return;
  // Byte 0: the size of the pieces the socket delivers; byte 1: the cap.
  const std::size_t piece = 1 + data[0] % 32;
  // (Not the 1 MiB default: a 13-byte header may make the reader allocate ~25 bytes per byte of
  // cap, which only slows the fuzzer down; the code paths are the same.)
  static constexpr std::size_t caps[] = {16, 64, 256, 4096, 65536};
  const std::size_t cap = caps[data[1] % std::size(caps)];
  const std::string_view stream(reinterpret_cast<const char*>(data.data()) + 2, data.size() - 2);

  const auto whole = read_all(stream, cap, stream.size() + 1);
  const auto pieces = read_all(stream, cap, piece);
  require(whole.failed == pieces.failed, "fed whole and in pieces: one failed, the other not");
  // After a failure, the replies before it are the same; without one, all of them are.
  require(whole.replies == pieces.replies, "fed whole and in pieces: different replies");
}

}  // namespace floodgate::fuzz
