#include "http_reply_reader.hpp"

#include <gtest/gtest.h>

namespace floodgate::bench {
namespace {

using state = http_reply_reader::state;

TEST(http_reply_reader, reads_a_response_fed_one_byte_at_a_time) {
  const std::string bytes =
      "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
      "content-length: 15\r\n\r\n{\"allowed\":false}";
  http_reply_reader r;
  state s = state::need_more;
  for (std::size_t i = 0; i < bytes.size() - 2; ++i) s = r.feed(bytes.substr(i, 1));
  EXPECT_EQ(s, state::complete);
  EXPECT_EQ(r.status(), 429);
  EXPECT_EQ(r.body(), "{\"allowed\":fals");
  EXPECT_TRUE(r.keep_alive());
  r.feed("e}");
  EXPECT_EQ(r.excess(), 2u);
}

TEST(http_reply_reader, connection_close_and_http_1_0) {
  http_reply_reader r;
  EXPECT_EQ(r.feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"),
            state::complete);
  EXPECT_FALSE(r.keep_alive());
  r.reset();
  EXPECT_EQ(r.feed("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"), state::complete);
  EXPECT_FALSE(r.keep_alive());
}

TEST(http_reply_reader, refuses_what_it_cannot_frame) {
  http_reply_reader r;
  EXPECT_EQ(r.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), state::error);
  r.reset();
  EXPECT_EQ(r.feed("HTTP/1.1 200 OK\r\n\r\n"), state::error);
  r.reset();
  EXPECT_EQ(r.feed("SMTP ready\r\n\r\n"), state::error);
  r.reset();
  EXPECT_EQ(r.feed("HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n"), state::error);
  r.reset();
  EXPECT_EQ(r.feed(std::string(http_reply_reader::max_head + 1, 'x')), state::error);
}

TEST(http_reply_reader, no_body_for_204) {
  http_reply_reader r;
  EXPECT_EQ(r.feed("HTTP/1.1 204 No Content\r\n\r\n"), state::complete);
  EXPECT_EQ(r.status(), 204);
}

}  // namespace
}  // namespace floodgate::bench
