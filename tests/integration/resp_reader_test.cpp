// The reply parser on raw bytes: every type, split at every byte, pipelined, nested, and
// the errors that must drop a connection (bad bytes, depth, size caps).
#include "redis/resp_reader.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace floodgate::redis {
namespace {

using namespace std::string_literals;
using type = reply::type;

// Feeds `chunks` one by one, collecting every reply; stops at an error.
struct parsed {
  std::vector<reply> replies;
  bool error = false;
  std::string message;
};

parsed parse(const std::vector<std::string>& chunks, std::size_t cap = 1 << 20) {
  resp_reader reader(cap);
  parsed out;
  for (const auto& c : chunks) {
    reader.feed(c);
    for (;;) {
      reply r;
      const auto res = reader.next(r);
      if (res == resp_reader::result::ready) {
        out.replies.push_back(std::move(r));
        continue;
      }
      if (res == resp_reader::result::error) {
        out.error = true;
        out.message = reader.error_message();
        return out;
      }
      break;
    }
  }
  return out;
}

// A compact rendering, to compare whole trees.
std::string show(const reply& r) {
  switch (r.kind) {
    case type::nil:
      return "nil";
    case type::string:
      return "$" + r.str;
    case type::status:
      return "+" + r.str;
    case type::error:
      return "-" + r.str;
    case type::integer:
      return ":" + std::to_string(r.integer);
    case type::array: {
      std::string s = "[";
      for (std::size_t i = 0; i < r.elements.size(); ++i) s += (i ? "," : "") + show(r.elements[i]);
      return s + "]";
    }
  }
  return "?";
}

std::vector<std::string> shows(const parsed& p) {
  std::vector<std::string> out;
  for (const auto& r : p.replies) out.push_back(show(r));
  return out;
}

// One stream holding every kind of reply, and what it parses to.
const std::string stream =
    "+OK\r\n"
    "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    ":42\r\n"
    ":-7\r\n"
    "$5\r\nhello\r\n"
    "$0\r\n\r\n"
    "$-1\r\n"
    "*-1\r\n"
    "*0\r\n"
    "$6\r\na\r\n\0\xff"
    "b\r\n"
    "*5\r\n:1\r\n:10\r\n:9\r\n:1000\r\n:-1\r\n"
    "*3\r\n*2\r\n:1\r\n$1\r\nx\r\n*0\r\n-ERR inner\r\n"s;
const std::vector<std::string> expected = {
    "+OK",
    "-NOSCRIPT No matching script. Please use EVAL.",
    ":42",
    ":-7",
    "$hello",
    "$",
    "nil",
    "nil",
    "[]",
    "$a\r\n\0\xff"
    "b"s,
    "[:1,:10,:9,:1000,:-1]",
    "[[:1,$x],[],-ERR inner]",
};

TEST(resp_reader, parses_every_type_in_one_feed) {
  const auto p = parse({stream});
  EXPECT_FALSE(p.error) << p.message;
  EXPECT_EQ(shows(p), expected);
}

TEST(resp_reader, split_at_every_byte_boundary) {
  for (std::size_t at = 0; at <= stream.size(); ++at) {
    const auto p = parse({stream.substr(0, at), stream.substr(at)});
    ASSERT_FALSE(p.error) << "split at " << at << ": " << p.message;
    ASSERT_EQ(shows(p), expected) << "split at " << at;
  }
}

TEST(resp_reader, split_at_every_pair_of_boundaries) {
  for (std::size_t a = 0; a <= stream.size(); a += 3)
    for (std::size_t b = a; b <= stream.size(); ++b) {
      const auto p = parse({stream.substr(0, a), stream.substr(a, b - a), stream.substr(b)});
      ASSERT_EQ(shows(p), expected) << "split at " << a << " and " << b;
    }
}

TEST(resp_reader, one_byte_at_a_time) {
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(shows(parse(bytes)), expected);
}

TEST(resp_reader, incomplete_input_waits) {
  resp_reader reader(1 << 20);
  reply r;
  EXPECT_EQ(reader.next(r), resp_reader::result::need_more);
  reader.feed("*2\r\n:1\r\n$3\r\nab");
  EXPECT_EQ(reader.next(r), resp_reader::result::need_more);
  reader.feed("c\r");
  EXPECT_EQ(reader.next(r), resp_reader::result::need_more);
  reader.feed("\n");
  ASSERT_EQ(reader.next(r), resp_reader::result::ready);
  EXPECT_EQ(show(r), "[:1,$abc]");
  EXPECT_EQ(reader.next(r), resp_reader::result::need_more);
}

TEST(resp_reader, nesting_up_to_eight_arrays) {
  std::string ok;
  for (int i = 0; i < 8; ++i) ok += "*1\r\n";
  ok += ":5\r\n";
  const auto p = parse({ok});
  ASSERT_FALSE(p.error) << p.message;
  EXPECT_EQ(shows(p), std::vector<std::string>{"[[[[[[[[:5]]]]]]]]"});
}

TEST(resp_reader, nesting_deeper_is_a_sticky_error) {
  std::string deep;
  for (int i = 0; i < 9; ++i) deep += "*1\r\n";
  deep += ":5\r\n";
  resp_reader reader(1 << 20);
  reader.feed(deep);
  reply r;
  EXPECT_EQ(reader.next(r), resp_reader::result::error);
  EXPECT_TRUE(reader.failed());
  EXPECT_NE(reader.error_message().find("nested"), std::string::npos) << reader.error_message();
  reader.feed("+OK\r\n");  // the stream cannot be resynchronised
  EXPECT_EQ(reader.next(r), resp_reader::result::error);
}

TEST(resp_reader, malformed_type_byte) {
  for (const auto& bad : {"?x\r\n"s, "OK\r\n"s, "*2\r\n:1\r\n!\r\n"s, "\r\n"s}) {
    const auto p = parse({bad});
    EXPECT_TRUE(p.error) << bad;
  }
  // The replies before the bad byte still come out.
  const auto p = parse({":1\r\n+OK\r\n%3\r\n"});
  EXPECT_TRUE(p.error);
  EXPECT_EQ(shows(p), (std::vector<std::string>{":1", "+OK"}));
}

TEST(resp_reader, negative_array_length) {
  EXPECT_TRUE(parse({"*-5\r\n"}).error);
}

TEST(resp_reader, huge_array_header_is_refused_before_allocating) {
  // 13 bytes announcing a billion elements: refused at once, not after 16 GB of vectors.
  const auto p = parse({"*1000000000\r\n"}, 1 << 20);
  EXPECT_TRUE(p.error);
  EXPECT_NE(p.message.find("max_reply_size"), std::string::npos) << p.message;
  // Elements announced across nested arrays count together.
  EXPECT_TRUE(parse({"*2\r\n*300\r\n"}, 900).error);
  EXPECT_FALSE(parse({"*2\r\n*290\r\n"}, 900).error);
}

TEST(resp_reader, reply_over_the_cap_is_an_error_before_it_is_complete) {
  // A 2000-byte bulk string against a 1024-byte cap: the error comes as soon as more than
  // 1024 bytes of it are buffered, without waiting for the rest.
  const std::string head = "$2000\r\n" + std::string(1100, 'x');
  const auto p = parse({head}, 1024);
  EXPECT_TRUE(p.error);
  EXPECT_NE(p.message.find("max_reply_size"), std::string::npos) << p.message;
  // Fed in small pieces, the same.
  std::vector<std::string> pieces;
  for (std::size_t i = 0; i < head.size(); i += 100) pieces.push_back(head.substr(i, 100));
  EXPECT_TRUE(parse(pieces, 1024).error);
}

TEST(resp_reader, arrays_count_whole_toward_the_cap) {
  // An array of many small elements is consumed element by element; its size still counts.
  std::string big = "*400\r\n";
  for (int i = 0; i < 400; ++i) big += ":1\r\n";  // 6 + 1600 bytes
  EXPECT_TRUE(parse({big}, 1024).error);
  std::vector<std::string> pieces;
  for (std::size_t i = 0; i < big.size(); i += 10) pieces.push_back(big.substr(i, 10));
  EXPECT_TRUE(parse(pieces, 1024).error);
  EXPECT_FALSE(parse({big}, 2048).error);
  // Few elements (within max_reply_size / 3), many bytes: the byte count catches it.
  std::string wide = "*100\r\n";
  for (int i = 0; i < 100; ++i) wide += "$10\r\n0123456789\r\n";  // 1706 bytes
  pieces.clear();
  for (std::size_t i = 0; i < wide.size(); i += 10) pieces.push_back(wide.substr(i, 10));
  EXPECT_TRUE(parse(pieces, 1024).error);
  EXPECT_FALSE(parse(pieces, 2048).error);
}

TEST(resp_reader, the_cap_is_per_reply_not_per_stream) {
  // Many pipelined replies, each under the cap, together far over it.
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "$10\r\n0123456789\r\n";
  const auto p = parse({many}, 64);
  EXPECT_FALSE(p.error) << p.message;
  EXPECT_EQ(p.replies.size(), 1000u);
  // A reply of exactly the cap is fine.
  const std::string exact = "$57\r\n" + std::string(57, 'y') + "\r\n";
  ASSERT_EQ(exact.size(), 64u);
  EXPECT_FALSE(parse({exact, exact}, 64).error);
  EXPECT_TRUE(parse({"$58\r\n" + std::string(58, 'y') + "\r\n"}, 64).error);
}

}  // namespace
}  // namespace floodgate::redis
