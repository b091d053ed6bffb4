// The command encoder, on bytes, and read back by the reply parser (an array of bulk strings
// is also a valid reply).
#include "redis/resp_writer.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "redis/resp_reader.hpp"

namespace floodgate::redis {
namespace {

using namespace std::string_literals;

TEST(resp_writer, encodes_an_array_of_bulk_strings) {
  std::string out;
  append_command(out, {"SET", "k", "v"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
  out.clear();
  append_command(out, {"ECHO", ""});
  EXPECT_EQ(out, "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
}

TEST(resp_writer, is_binary_safe) {
  std::string out;
  const std::string key = "a\r\nb\0c\xff{}"s;
  append_command(out, {"GET", key});
  EXPECT_EQ(out, "*2\r\n$3\r\nGET\r\n$9\r\n" + key + "\r\n");
}

TEST(resp_writer, integers_in_decimal) {
  std::string out;
  append_array_header(out, 3);
  append_bulk(out, std::int64_t{0});
  append_bulk(out, std::numeric_limits<std::int64_t>::min());
  append_bulk(out, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(out, "*3\r\n$1\r\n0\r\n$20\r\n-9223372036854775808\r\n$19\r\n9223372036854775807\r\n");
}

TEST(resp_writer, bulk_size_matches) {
  for (std::size_t n : {0, 1, 9, 10, 99, 100, 12345}) {
    std::string out;
    append_bulk(out, std::string(n, 'x'));
    EXPECT_EQ(out.size(), bulk_size(n));
  }
}

TEST(resp_writer, round_trips_through_the_reader) {
  std::string out;
  const std::string big(100'000, '\n');
  append_command(out, {"EVALSHA", "abc", "1", "floodgate:x:gcra:{\0\r\n}"s, big});
  resp_reader reader(1 << 20);
  reader.feed(out);
  reply r;
  ASSERT_EQ(reader.next(r), resp_reader::result::ready);
  ASSERT_EQ(r.kind, reply::type::array);
  ASSERT_EQ(r.elements.size(), 5u);
  EXPECT_EQ(r.elements[3].str, "floodgate:x:gcra:{\0\r\n}"s);
  EXPECT_EQ(r.elements[4].str, big);
}

}  // namespace
}  // namespace floodgate::redis
