// h2_session on bytes: an nghttp2 client session (a real HTTP/2 implementation, not ours) makes
// gRPC calls, and the bytes go back and forth in memory. No sockets, no threads.
#include "h2_session.hpp"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace floodgate::service::envoy {
namespace {

std::string grpc_frame(std::string_view message, std::uint32_t claimed, bool compressed = false) {
  std::string out(5, '\0');
  out[0] = compressed ? 1 : 0;
  out[1] = static_cast<char>(claimed >> 24);
  out[2] = static_cast<char>(claimed >> 16);
  out[3] = static_cast<char>(claimed >> 8);
  out[4] = static_cast<char>(claimed);
  return out.append(message);
}
std::string grpc_frame(std::string_view message) {
  return grpc_frame(message, static_cast<std::uint32_t>(message.size()));
}

// What the server's events saw; `reply` answers a message (or not, when empty).
struct recorder : h2_session::events {
  struct call {
    std::string path;
    std::optional<std::chrono::nanoseconds> timeout;
    std::vector<std::string> messages;
    int closed = 0;
  };
  std::map<std::int32_t, call> calls;
  std::function<void(std::int32_t, std::string_view)> reply;

  void on_call(std::int32_t id, std::string_view path,
               std::optional<std::chrono::nanoseconds> timeout) override {
    calls[id].path = path;
    calls[id].timeout = timeout;
  }
  void on_message(std::int32_t id, std::string_view message) override {
    calls[id].messages.emplace_back(message);
    if (reply) reply(id, message);
  }
  void on_closed(std::int32_t id) override { ++calls[id].closed; }
};

// The client side: nghttp2 as a client, what it received per stream.
class client {
 public:
  struct response {
    std::map<std::string, std::string> headers;  // headers and trailers together
    std::string data;
    bool ended = false;
    std::optional<std::uint32_t> reset;  // RST_STREAM's error code
  };

  // `settings`: the client's SETTINGS (INITIAL_WINDOW_SIZE 0: no answer's message can come).
  explicit client(std::vector<nghttp2_settings_entry> own_settings = {}) {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* f, const std::uint8_t* n, std::size_t nl,
                const std::uint8_t* v, std::size_t vl, std::uint8_t, void* user) {
          static_cast<client*>(user)
              ->responses[f->hd.stream_id]
              .headers[std::string(reinterpret_cast<const char*>(n), nl)] =
              std::string(reinterpret_cast<const char*>(v), vl);
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cbs, [](nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* d,
                std::size_t len, void* user) {
          static_cast<client*>(user)->responses[id].data.append(reinterpret_cast<const char*>(d),
                                                                len);
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* f, void* user) {
          auto& me = *static_cast<client*>(user);
          if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK))
            for (std::size_t i = 0; i < f->settings.niv; ++i)
              me.settings[f->settings.iv[i].settings_id] = f->settings.iv[i].value;
          if (f->hd.type == NGHTTP2_RST_STREAM)
            me.responses[f->hd.stream_id].reset = f->rst_stream.error_code;
          if (f->hd.flags & NGHTTP2_FLAG_END_STREAM &&
              (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA))
            me.responses[f->hd.stream_id].ended = true;
          return 0;
        });
    nghttp2_session_client_new(&session_, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, own_settings.data(), own_settings.size());
  }
  ~client() { nghttp2_session_del(session_); }

  // Opens a call to `path`; `body` goes in DATA frames of at most `chunk` bytes, END_STREAM
  // after the last one when `end`. Extra headers are name, value pairs.
  std::int32_t call(const std::string& path, std::string body, bool end = true,
                    std::vector<std::pair<std::string, std::string>> extra = {},
                    std::size_t chunk = 16384) {
    std::vector<std::pair<std::string, std::string>> h = {{":method", "POST"},
                                                          {":scheme", "http"},
                                                          {":path", path},
                                                          {":authority", "localhost"},
                                                          {"content-type", "application/grpc"},
                                                          {"te", "trailers"}};
    h.insert(h.end(), extra.begin(), extra.end());
    std::vector<nghttp2_nv> nv;
    for (auto& [n, v] : h)
      nv.push_back({reinterpret_cast<std::uint8_t*>(n.data()),
                    reinterpret_cast<std::uint8_t*>(v.data()), n.size(), v.size(),
                    NGHTTP2_NV_FLAG_NONE});
    bodies_.push_back({std::move(body), 0, chunk, end});
    nghttp2_data_provider p{};
    p.source.ptr = &bodies_.back();
    p.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                         std::uint32_t* flags, nghttp2_data_source* src, void*) -> ssize_t {
      auto& b = *static_cast<pending_body*>(src->ptr);
      const auto n = std::min({length, b.chunk, b.data.size() - b.sent});
      std::memcpy(buf, b.data.data() + b.sent, n);
      b.sent += n;
      if (b.sent == b.data.size()) {
        if (!b.end) {
          if (n == 0) return NGHTTP2_ERR_DEFERRED;
          return static_cast<ssize_t>(n);
        }
        *flags |= NGHTTP2_DATA_FLAG_EOF;
      }
      return static_cast<ssize_t>(n);
    };
    const bool headers_only = end && bodies_.back().data.empty();
    return nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(),
                                  headers_only ? nullptr : &p, nullptr);
  }

  // Lets the server send `bytes` more on `stream`.
  void window_update(std::int32_t stream, std::int32_t bytes) {
    nghttp2_submit_window_update(session_, NGHTTP2_FLAG_NONE, stream, bytes);
  }
  void reset(std::int32_t stream) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, NGHTTP2_CANCEL);
  }

  // Moves bytes both ways until neither side has more.
  void exchange(h2_session& server) {
    for (int round = 0; round < 100; ++round) {
      bool moved = false;
      const std::uint8_t* data = nullptr;
      for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;) {
        moved = true;
        server_ok = server.receive(data, static_cast<std::size_t>(n)) && server_ok;
      }
      std::string out;
      server.send(out, 1 << 20);
      if (!out.empty()) {
        moved = true;
        nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(out.data()),
                                 out.size());
      }
      if (!moved) return;
    }
  }

  std::map<std::int32_t, response> responses;
  std::map<std::int32_t, std::uint32_t> settings;
  bool server_ok = true;

 private:
  struct pending_body {
    std::string data;
    std::size_t sent;
    std::size_t chunk;
    bool end;
  };
  nghttp2_session* session_ = nullptr;
  std::deque<pending_body> bodies_;
};

TEST(h2_session, a_unary_call_round_trips_with_its_timeout_and_trailers) {
  recorder r;
  h2_session server(r, {});
  r.reply = [&](std::int32_t id, std::string_view m) { server.answer(id, "re:" + std::string(m)); };
  client c;
  const auto id =
      c.call("/pkg.Service/Method", grpc_frame("hello"), true, {{"grpc-timeout", "250m"}});
  c.exchange(server);
  EXPECT_TRUE(server.established());
  EXPECT_EQ(c.settings[NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS], 100u);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[id].path, "/pkg.Service/Method");
  EXPECT_EQ(r.calls[id].timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(r.calls[id].messages, std::vector<std::string>{"hello"});
  EXPECT_EQ(r.calls[id].closed, 1);
  const auto& resp = c.responses[id];
  EXPECT_EQ(resp.headers.at(":status"), "200");
  EXPECT_EQ(resp.headers.at("content-type"), "application/grpc");
  EXPECT_EQ(resp.data, grpc_frame("re:hello"));
  EXPECT_EQ(resp.headers.at("grpc-status"), "0");
  EXPECT_TRUE(resp.ended);
  EXPECT_FALSE(resp.reset) << "the client had finished: nothing to reset";
  EXPECT_EQ(server.open_streams(), 0u);
}

// nghttp2's HTTP messaging checks are off (h2_session.cpp): a call is judged by its gRPC
// headers and message. A call without :path reaches on_call with an empty one (grpc_connection
// answers UNIMPLEMENTED, unknown method) instead of a bare reset; a header HTTP/2 calls
// malformed (an upper-case name) is not read and refuses nothing, as before.
TEST(h2_session, calls_are_judged_by_their_grpc_headers_alone) {
  recorder r;
  h2_session server(r, {});
  r.reply = [&](std::int32_t id, std::string_view m) { server.answer(id, "re:" + std::string(m)); };
  client c;
  const auto odd = c.call("/pkg.Service/Method", grpc_frame("hi"), true, {{"X-Upper", "v"}});
  const auto no_path = c.call("", grpc_frame("hi"));
  c.exchange(server);
  EXPECT_EQ(r.calls[odd].path, "/pkg.Service/Method");
  EXPECT_EQ(c.responses[odd].data, grpc_frame("re:hi"));
  EXPECT_EQ(c.responses[odd].headers.at("grpc-status"), "0");
  EXPECT_FALSE(c.responses[odd].reset);
  ASSERT_TRUE(r.calls.contains(no_path));
  EXPECT_EQ(r.calls[no_path].path, "");
  EXPECT_EQ(server.open_streams(), 0u);
}

TEST(h2_session, a_message_in_pieces_is_delivered_once_whole) {
  recorder r;
  h2_session server(r, {});
  client c;
  const auto id = c.call("/m", grpc_frame(std::string(1000, 'x')), true, {}, 3);
  c.exchange(server);
  ASSERT_EQ(r.calls[id].messages.size(), 1u);
  EXPECT_EQ(r.calls[id].messages[0], std::string(1000, 'x'));
  EXPECT_TRUE(c.responses[id].headers.empty()) << "not answered yet";
  server.fail(id, grpc_status::unavailable, "50% down\n");
  c.exchange(server);
  EXPECT_EQ(c.responses[id].headers.at("grpc-status"), "14");
  EXPECT_EQ(c.responses[id].headers.at("grpc-message"), "50%25 down%0A");
  EXPECT_EQ(r.calls[id].closed, 1);
}

// The prefix claims more than the cap: refused at once, before the bytes arrive, and the stream
// the client is still sending on is reset so that it holds no slot.
TEST(h2_session, a_message_over_the_cap_is_refused_at_its_prefix_and_the_stream_reset) {
  recorder r;
  h2_session server(r, {.max_message_bytes = 64});
  client c;
  const auto id = c.call("/m", grpc_frame("0123456789", 1000), false);
  c.exchange(server);
  EXPECT_TRUE(r.calls[id].messages.empty());
  EXPECT_EQ(c.responses[id].headers.at("grpc-status"), "8");
  EXPECT_EQ(c.responses[id].headers.at("grpc-message"),
            "received message larger than max (1000 vs. 64)");
  EXPECT_EQ(c.responses[id].reset, std::optional<std::uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_EQ(r.calls[id].closed, 1);
  EXPECT_EQ(server.open_streams(), 0u);
}

TEST(h2_session, a_call_ended_without_a_message_is_cancelled) {
  recorder r;
  h2_session server(r, {});
  client c;
  const auto none = c.call("/m", "", true);
  const auto part = c.call("/m", grpc_frame("abc", 10), true);
  c.exchange(server);
  for (const auto id : {none, part}) {
    EXPECT_TRUE(r.calls[id].messages.empty());
    EXPECT_EQ(c.responses[id].headers.at("grpc-status"), "1");
    EXPECT_EQ(c.responses[id].headers.at("grpc-message"), "no request message");
    EXPECT_EQ(r.calls[id].closed, 1);
  }
}

// As upstream's server (grpc-go, no decompressor registered) answers: a grpc-encoding other
// than identity is UNIMPLEMENTED at the headers, whatever the message; the compressed flag
// without an encoding is INTERNAL. Before, the encoding was ignored and the flag UNIMPLEMENTED.
TEST(h2_session, a_compressed_message_is_unimplemented_naming_its_encoding) {
  recorder r;
  h2_session server(r, {});
  client c;
  const auto id = c.call("/m", grpc_frame("abc", 3, true), true, {{"grpc-encoding", "gzip"}});
  const auto flag_clear = c.call("/m", grpc_frame("abc"), true, {{"grpc-encoding", "deflate"}});
  c.exchange(server);
  EXPECT_TRUE(r.calls[id].messages.empty());
  EXPECT_EQ(c.responses[id].headers.at("grpc-status"), "12");
  EXPECT_EQ(c.responses[id].headers.at("grpc-message"),
            "grpc: Decompressor is not installed for grpc-encoding \"gzip\"");
  EXPECT_TRUE(r.calls[flag_clear].messages.empty());
  EXPECT_EQ(c.responses[flag_clear].headers.at("grpc-status"), "12");
  EXPECT_EQ(c.responses[flag_clear].headers.at("grpc-message"),
            "grpc: Decompressor is not installed for grpc-encoding \"deflate\"");
  EXPECT_EQ(r.calls[id].closed, 1);
}

TEST(h2_session, the_compressed_flag_without_an_encoding_is_internal) {
  recorder r;
  h2_session server(r, {});
  client c;
  const auto id = c.call("/m", grpc_frame("abc", 3, true));
  const auto identity =
      c.call("/m", grpc_frame("abc", 3, true), true, {{"grpc-encoding", "identity"}});
  c.exchange(server);
  for (const auto s : {id, identity}) {
    EXPECT_TRUE(r.calls[s].messages.empty());
    EXPECT_EQ(c.responses[s].headers.at("grpc-status"), "13");
    EXPECT_EQ(c.responses[s].headers.at("grpc-message"),
              "grpc: compressed flag set with identity or empty encoding");
  }
}

TEST(h2_session, identity_encoding_is_served) {
  recorder r;
  h2_session server(r, {});
  client c;
  const auto id = c.call("/m", grpc_frame("abc"), true, {{"grpc-encoding", "identity"}});
  c.exchange(server);
  ASSERT_EQ(r.calls[id].messages.size(), 1u);
  EXPECT_EQ(r.calls[id].messages[0], "abc");
}

TEST(h2_session, headers_over_the_cap_reset_the_stream_unseen) {
  recorder r;
  h2_session server(r, {.max_header_bytes = 1024});
  client c;
  const auto id = c.call("/m", grpc_frame("abc"), true, {{"x-big", std::string(2000, 'b')}});
  const auto ok = c.call("/m", grpc_frame("abc"));
  c.exchange(server);
  EXPECT_FALSE(r.calls.contains(id));
  EXPECT_TRUE(c.responses[id].reset.has_value());
  EXPECT_EQ(r.calls[ok].messages.size(), 1u) << "the connection goes on";
  EXPECT_TRUE(c.server_ok);
}

TEST(h2_session, bad_grpc_timeouts_are_ignored) {
  recorder r;
  h2_session server(r, {});
  client c;
  const auto a = c.call("/m", grpc_frame("a"), true, {{"grpc-timeout", "1S"}});
  const auto b = c.call("/m", grpc_frame("b"), true, {{"grpc-timeout", "123456789m"}});
  const auto d = c.call("/m", grpc_frame("c"), true, {{"grpc-timeout", "5x"}});
  c.exchange(server);
  EXPECT_EQ(r.calls[a].timeout, std::chrono::seconds(1));
  EXPECT_FALSE(r.calls[b].timeout) << "more than 8 digits";
  EXPECT_FALSE(r.calls[d].timeout);
}

// Eight digits of hours is 11,000 years: more than nanoseconds (or a steady_clock time point
// plus it) can hold. Such a deadline is none in practice, not an overflow into the past.
TEST(h2_session, the_longest_grpc_timeouts_are_far_in_the_future_not_overflowed) {
  recorder r;
  h2_session server(r, {});
  client c;
  std::vector<std::int32_t> ids;
  for (const char* t : {"99999999H", "2562047H", "3000000H", "99999999M", "99999999S"})
    ids.push_back(c.call("/m", grpc_frame("a"), true, {{"grpc-timeout", t}}));
  c.exchange(server);
  for (const auto id : ids) {
    ASSERT_TRUE(r.calls[id].timeout) << id;
    EXPECT_GE(*r.calls[id].timeout, std::chrono::hours(24 * 365)) << id;
    // What grpc_connection adds it to: the sum must not overflow either.
    const auto now = std::chrono::steady_clock::now();
    EXPECT_GT(now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        *r.calls[id].timeout),
              now)
        << id;
  }
}

// Not HTTP/2 at all: receive() says so and the connection closes (nothing to answer).
// HTTP/2 that breaks the protocol: a GOAWAY goes out, then the session is over.
TEST(h2_session, garbage_or_a_protocol_error_ends_the_connection) {
  recorder r;
  h2_session plain_http(r, {});
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_FALSE(plain_http.receive(reinterpret_cast<const std::uint8_t*>(junk.data()), junk.size()));

  h2_session server(r, {});
  std::string bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  bytes.append("\0\0\0\x04\0\0\0\0\0", 9);  // SETTINGS, empty
  bytes.append("\0\0\0\0\0\0\0\0\0", 9);    // DATA on stream 0: a connection error
  server.receive(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  std::string out;
  server.send(out, 1 << 20);
  EXPECT_NE(out.find('\x07'), std::string::npos) << "a GOAWAY frame (type 7)";
  EXPECT_FALSE(server.alive());
}

}  // namespace
}  // namespace floodgate::service::envoy

namespace floodgate::service::envoy {
namespace {

// A client that keeps its flow-control window shut: the answer's headers go, its message
// waits, counted unsent (the oldest first) until the window opens or the stream ends.
TEST(h2_session, answers_the_window_holds_back_are_counted_until_it_opens) {
  recorder r;
  h2_session server(r, {});
  r.reply = [&](std::int32_t id, std::string_view m) { server.answer(id, "re:" + std::string(m)); };
  client c({{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}});
  const auto first = c.call("/m", grpc_frame("a"));
  c.exchange(server);
  EXPECT_EQ(c.responses[first].headers.at(":status"), "200");
  EXPECT_EQ(c.responses[first].data, "");
  EXPECT_EQ(server.unsent_answers(), 1u);
  const auto oldest = server.oldest_unsent();
  ASSERT_TRUE(oldest);
  const auto second = c.call("/m", grpc_frame("b"));
  const auto third = c.call("/m", grpc_frame("c"));
  c.exchange(server);
  EXPECT_EQ(server.unsent_answers(), 3u);
  EXPECT_EQ(server.oldest_unsent(), oldest) << "the first is still the oldest";
  c.window_update(first, 100);
  c.exchange(server);
  EXPECT_EQ(c.responses[first].data, grpc_frame("re:a"));
  EXPECT_EQ(c.responses[first].headers.at("grpc-status"), "0");
  EXPECT_EQ(server.unsent_answers(), 2u);
  EXPECT_GT(server.oldest_unsent(), oldest) << "the second is the oldest now";
  c.reset(second);  // given up by the client: no longer held
  c.exchange(server);
  EXPECT_EQ(server.unsent_answers(), 1u);
  c.window_update(third, 100);
  c.exchange(server);
  EXPECT_EQ(c.responses[third].data, grpc_frame("re:c"));
  EXPECT_EQ(server.unsent_answers(), 0u);
  EXPECT_FALSE(server.oldest_unsent());
  EXPECT_EQ(server.open_streams(), 0u);
}

// Streams that ended are recycled (state and map node): a new one carries nothing of the one
// before it (a refused encoding, a timeout, a message in pieces, an answer).
TEST(h2_session, a_stream_after_ended_ones_starts_clean) {
  recorder r;
  h2_session server(r, {});
  r.reply = [&](std::int32_t id, std::string_view m) { server.answer(id, "re:" + std::string(m)); };
  client c;
  for (int round = 0; round < 40; ++round) {
    const auto gzip = c.call("/g", grpc_frame("x"), true,
                             {{"grpc-encoding", "gzip"}, {"grpc-timeout", "5S"}});
    const auto pieces = c.call("/n", grpc_frame(std::string(100, 'y')), true, {}, 7);
    const auto plain = c.call("/p", grpc_frame("z"));
    c.exchange(server);
    EXPECT_EQ(c.responses[gzip].headers.at("grpc-status"), "12");
    EXPECT_EQ(c.responses[pieces].data, grpc_frame("re:" + std::string(100, 'y')));
    EXPECT_EQ(c.responses[plain].data, grpc_frame("re:z"));
    EXPECT_EQ(c.responses[plain].headers.at("grpc-status"), "0");
    EXPECT_EQ(r.calls[plain].path, "/p");
    EXPECT_FALSE(r.calls[plain].timeout) << "round " << round;
    EXPECT_EQ(r.calls[plain].messages, std::vector<std::string>{"z"});
  }
  EXPECT_EQ(server.open_streams(), 0u);
  EXPECT_EQ(server.unsent_answers(), 0u);
}

// nghttp2's memory comes from the session's recycled blocks: rounds of many calls in flight at
// once (more than a size class keeps), with header values of every size (the largest beyond
// any class) and messages in pieces, each answered once and whole, round after round.
TEST(h2_session, many_calls_in_flight_round_after_round_are_each_answered_whole) {
  recorder r;
  h2_session server(r, {});
  r.reply = [&](std::int32_t id, std::string_view m) { server.answer(id, "re:" + std::string(m)); };
  client c;
  for (int round = 0; round < 5; ++round) {
    std::vector<std::pair<std::int32_t, std::string>> calls;
    for (int i = 0; i < 60; ++i) {
      const std::string message(static_cast<std::size_t>(1 + 97 * i),
                                static_cast<char>('a' + i % 26));
      const std::string padding(static_cast<std::size_t>(31 * i * (round + 1)), 'p');
      calls.emplace_back(c.call("/m", grpc_frame(message), true, {{"x-padding", padding}},
                                static_cast<std::size_t>(5 + i)),
                         message);
    }
    c.exchange(server);
    for (const auto& [id, message] : calls) {
      EXPECT_EQ(c.responses[id].data, grpc_frame("re:" + message)) << "round " << round;
      EXPECT_EQ(c.responses[id].headers["grpc-status"], "0") << "round " << round;
      EXPECT_EQ(r.calls[id].closed, 1) << "round " << round;
    }
  }
  EXPECT_TRUE(c.server_ok);
  EXPECT_EQ(server.open_streams(), 0u);
}

}  // namespace
}  // namespace floodgate::service::envoy
