#include "h2_session.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace floodgate::service::envoy {

struct h2_session::stream_state {
  std::int32_t id = 0;
  std::string path;
  std::size_t header_bytes = 0;
  std::optional<std::chrono::nanoseconds> timeout;
  std::string encoding;    // grpc-encoding: the message's compression, if any
  bool called = false;     // on_call seen: on_closed is owed
  bool delivered = false;  // its message went to on_message
  bool answered = false;   // a response is queued
  std::string in;          // a message arriving in pieces
  std::string out;         // the answer's message, prefixed
  std::size_t out_sent = 0;
  std::string status_text;  // the trailer's grpc-status
  std::uint64_t answer_place = 0;  // among the session's answers with a message
  bool unsent = false;             // its message is not all sent (counted in unsent_)

  // For a new stream: as made, but the strings keep their capacity (a large one excepted).
  void reuse(std::int32_t stream) {
    constexpr std::size_t keep_bytes = 1024;
    id = stream;
    header_bytes = 0;
    timeout.reset();
    called = delivered = answered = unsent = false;
    for (auto* s : {&path, &encoding, &in, &out, &status_text})
      if (s->capacity() > keep_bytes)
        std::string().swap(*s);
      else
        s->clear();
    out_sent = 0;
    answer_place = 0;
  }
};

namespace {

using stream_state = h2_session::stream_state;

nghttp2_nv header(std::string_view name, std::string_view value, bool copy_value = false) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(),
          static_cast<std::uint8_t>(NGHTTP2_NV_FLAG_NO_COPY_NAME |
                                    (copy_value ? 0 : NGHTTP2_NV_FLAG_NO_COPY_VALUE))};
}

// grpc-timeout: up to 8 digits and a unit (H M S m u n), gRPC over HTTP/2's form. Eight digits
// of hours (11,000 years) overflow nanoseconds: a timeout beyond ten years is ten years, a
// deadline that never comes, and one a steady_clock time point can still be added to.
std::optional<std::chrono::nanoseconds> parse_timeout(std::string_view v) {
  if (v.size() < 2 || v.size() > 9) return std::nullopt;
  std::int64_t n = 0;
  const auto digits = v.substr(0, v.size() - 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc{} || end != digits.data() + digits.size() || n < 0) return std::nullopt;
  using namespace std::chrono;
  constexpr nanoseconds longest = hours(24 * 365 * 10);
  const auto capped = [&](auto unit) -> nanoseconds {
    const auto in_unit = duration_cast<decltype(unit)>(longest).count();
    return n >= in_unit ? longest : duration_cast<nanoseconds>(decltype(unit)(n));
  };
  switch (v.back()) {
    case 'H':
      return capped(hours(1));
    case 'M':
      return capped(minutes(1));
    case 'S':
      return capped(seconds(1));
    case 'm':
      return capped(milliseconds(1));
    case 'u':
      return capped(microseconds(1));
    case 'n':
      return nanoseconds(n);
    default:
      return std::nullopt;
  }
}

// grpc-message is percent-encoded (gRPC over HTTP/2): bytes outside printable ASCII, and '%'.
std::string percent_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const unsigned char c : s) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

constexpr std::string_view content_type = "application/grpc";

// Ended streams kept for new ones (their state and map node): a connection's calls, one after
// another or multiplexed as Envoy sends them, reuse them without allocating; more are freed.
constexpr std::size_t spare_streams = 16;

}  // namespace

// nghttp2's memory for one session, its small blocks recycled: each call has nghttp2 allocate
// about seven (its stream, the answer's frames and their header arrays) and free them when it
// ends, so a connection's calls after the first reuse them rather than go to malloc. A block
// carries its size class in a 16-byte header (malloc's alignment is kept); larger ones, and
// more than spare_blocks of a class, go back to free(). One session, one thread: no lock.
class h2_session::block_pool {
 public:
  block_pool() = default;
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;
  ~block_pool() {
    for (auto* head : spare_)
      while (head) {
        auto* next = head->next;
        std::free(head);
        head = next;
      }
  }

  nghttp2_mem* mem() noexcept { return &mem_; }

 private:
  static constexpr std::size_t header_bytes = 16;
  static constexpr std::array<std::size_t, 5> class_bytes{64, 128, 256, 512, 1024};
  static constexpr std::uint32_t unpooled = class_bytes.size();
  static constexpr std::size_t spare_blocks = 16;  // per class

  struct header {
    std::uint32_t size_class;  // unpooled: a block of exactly `size` bytes, freed at once
    std::size_t size;          // what was asked for
  };
  static_assert(sizeof(header) <= header_bytes);
  struct free_block {
    free_block* next;
  };

  static std::uint32_t class_of(std::size_t size) noexcept {
    for (std::uint32_t c = 0; c < class_bytes.size(); ++c)
      if (size <= class_bytes[c]) return c;
    return unpooled;
  }
  static header* header_of(void* p) noexcept {
    return reinterpret_cast<header*>(static_cast<char*>(p) - header_bytes);
  }

  void* allocate(std::size_t size) noexcept {
    const auto c = class_of(size);
    void* block = nullptr;
    if (c != unpooled && spare_[c]) {
      block = spare_[c];
      spare_[c] = spare_[c]->next;
      --spares_[c];
    } else {
      block = std::malloc(header_bytes + (c == unpooled ? size : class_bytes[c]));
      if (!block) return nullptr;
    }
    auto* h = ::new (block) header{c, size};
    return reinterpret_cast<char*>(h) + header_bytes;
  }

  void release(void* p) noexcept {
    if (!p) return;
    auto* h = header_of(p);
    const auto c = h->size_class;
    if (c == unpooled || spares_[c] == spare_blocks) return std::free(h);
    spare_[c] = ::new (static_cast<void*>(h)) free_block{spare_[c]};
    ++spares_[c];
  }

  void* reallocate(void* p, std::size_t size) noexcept {
    if (!p) return allocate(size);
    auto* h = header_of(p);
    if (h->size_class != unpooled && size <= class_bytes[h->size_class]) {
      h->size = size;
      return p;
    }
    void* moved = allocate(size);
    if (!moved) return nullptr;  // nghttp2 keeps p, as after a failed realloc
    std::memcpy(moved, p, std::min(size, h->size));
    release(p);
    return moved;
  }

  static block_pool& self(void* user) noexcept { return *static_cast<block_pool*>(user); }
  nghttp2_mem mem_{
      this, [](std::size_t size, void* user) { return self(user).allocate(size); },
      [](void* p, void* user) { self(user).release(p); },
      [](std::size_t n, std::size_t size, void* user) -> void* {
        if (size != 0 && n > SIZE_MAX / size) return nullptr;  // n * size overflows
        void* p = self(user).allocate(n * size);
        if (p) std::memset(p, 0, n * size);
        return p;
      },
      [](void* p, std::size_t size, void* user) { return self(user).reallocate(p, size); }};
  std::array<free_block*, class_bytes.size()> spare_{};
  std::array<std::size_t, class_bytes.size()> spares_{};
};

struct h2_session::callbacks {
  static h2_session& self(void* user) { return *static_cast<h2_session*>(user); }
  // The stream's state: the one whose headers came last without a lookup (a connection with
  // one call at a time has no other), else nghttp2's stream user data.
  static stream_state* stream_of(nghttp2_session* s, const h2_session& me, std::int32_t id) {
    if (me.receiving_ && me.receiving_->id == id) return me.receiving_;
    return static_cast<stream_state*>(nghttp2_session_get_stream_user_data(s, id));
  }

  static int begin_headers(nghttp2_session* s, const nghttp2_frame* f, void* user) {
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto& me = self(user);
    const auto id = f->hd.stream_id;
    stream_state* st = nullptr;
    if (me.spare_.empty()) {
      auto owned = std::make_unique<stream_state>();
      st = owned.get();
      st->id = id;
      me.streams_.emplace(id, std::move(owned));
    } else {
      // A stream that ended: its map node and state again, no allocation.
      auto node = std::move(me.spare_.back());
      me.spare_.pop_back();
      node.key() = id;
      st = node.mapped().get();
      st->reuse(id);
      me.streams_.insert(std::move(node));
    }
    nghttp2_session_set_stream_user_data(s, id, st);
    me.receiving_ = st;
    return 0;
  }

  static int on_header(nghttp2_session* s, const nghttp2_frame* f, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t, void* user) {
    // Header blocks do not interleave (RFC 9113 section 4.3): begin_headers' stream, no lookup.
    auto* st = stream_of(s, self(user), f->hd.stream_id);
    if (!st || st->called) return 0;  // trailers from the client: nothing we use
    st->header_bytes += namelen + valuelen;
    if (st->header_bytes > self(user).limits_.max_header_bytes)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // nghttp2 resets the stream
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":path")
      st->path.assign(v);
    else if (n == "grpc-timeout")
      st->timeout = parse_timeout(v);
    else if (n == "grpc-encoding")
      st->encoding.assign(v);
    return 0;
  }

  static int frame_recv(nghttp2_session* s, const nghttp2_frame* f, void* user) {
    auto& me = self(user);
    if (f->hd.type == NGHTTP2_SETTINGS) me.established_ = true;
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) return 0;
    auto* st = stream_of(s, me, f->hd.stream_id);
    if (!st) return 0;
    if (f->hd.type == NGHTTP2_HEADERS && !st->called) {
      st->called = true;
      me.events_.on_call(st->id, st->path, st->timeout);
      // No decompressor here, as upstream's grpc-go server has none: refused at the headers,
      // whatever the message's flag, in grpc-go's words (an unknown method was answered first).
      if (!st->encoding.empty() && st->encoding != "identity")
        me.fail(st->id, grpc_status::unimplemented,
                "grpc: Decompressor is not installed for grpc-encoding \"" + st->encoding + "\"");
    }
    // The client finished its side: a call without its message will never have one.
    if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) && !st->delivered && !st->answered)
      me.fail(st->id, grpc_status::cancelled, "no request message");
    return 0;
  }

  static int data_chunk(nghttp2_session* s, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                        std::size_t len, void* user) {
    auto& me = self(user);
    auto* st = stream_of(s, me, id);
    if (!st || st->delivered || st->answered) return 0;
    const std::string_view chunk(reinterpret_cast<const char*>(data), len);
    // Most messages come whole in one chunk: no copy then.
    std::string_view have = chunk;
    if (!st->in.empty()) have = st->in.append(chunk);
    const auto keep = [&] {
      if (st->in.empty()) st->in.assign(chunk);
      return 0;
    };
    if (have.size() < 5) return keep();
    if (have[0] != 0) {  // compressed, yet no encoding said how (any other was refused)
      me.fail(id, grpc_status::internal,
              "grpc: compressed flag set with identity or empty encoding");
      return 0;
    }
    const std::uint32_t size = (std::uint32_t{static_cast<std::uint8_t>(have[1])} << 24) |
                               (std::uint32_t{static_cast<std::uint8_t>(have[2])} << 16) |
                               (std::uint32_t{static_cast<std::uint8_t>(have[3])} << 8) |
                               std::uint32_t{static_cast<std::uint8_t>(have[4])};
    if (size > me.limits_.max_message_bytes) {
      me.fail(id, grpc_status::resource_exhausted,
              "received message larger than max (" + std::to_string(size) + " vs. " +
                  std::to_string(me.limits_.max_message_bytes) + ")");
      return 0;
    }
    if (have.size() < 5 + std::size_t{size}) return keep();
    st->delivered = true;
    me.events_.on_message(id, have.substr(5, size));
    std::string().swap(st->in);  // parsed by now: its bytes are not kept while it is decided
    return 0;
  }

  static int frame_send(nghttp2_session* s, const nghttp2_frame* f, void*) {
    // Answered while the client still sends: reset, so the stream frees its slot now.
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        nghttp2_session_get_stream_remote_close(s, f->hd.stream_id) == 0)
      nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
    return 0;
  }

  static int stream_close(nghttp2_session* s, std::int32_t id, std::uint32_t, void* user) {
    auto& me = self(user);
    auto* st = stream_of(s, me, id);
    if (!st) return 0;
    nghttp2_session_set_stream_user_data(s, id, nullptr);
    if (me.receiving_ == st) me.receiving_ = nullptr;
    const bool owed = st->called;
    if (st->unsent) --me.unsent_;
    auto node = me.streams_.extract(id);
    if (me.spare_.size() < spare_streams) me.spare_.push_back(std::move(node));
    if (owed) me.events_.on_closed(id);
    return 0;
  }

  static ssize_t read_answer(nghttp2_session* s, std::int32_t id, std::uint8_t* buf,
                             std::size_t length, std::uint32_t* flags, nghttp2_data_source*,
                             void* user) {
    auto* st = stream_of(s, self(user), id);
    if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::size_t n = std::min(length, st->out.size() - st->out_sent);
    std::memcpy(buf, st->out.data() + st->out_sent, n);
    st->out_sent += n;
    if (st->out_sent == st->out.size()) {
      if (st->unsent) {
        st->unsent = false;
        --self(user).unsent_;
      }
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const std::array<nghttp2_nv, 1> trailers{header("grpc-status", "0")};
      if (nghttp2_submit_trailer(s, id, trailers.data(), trailers.size()) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return static_cast<ssize_t>(n);
  }
};

h2_session::h2_session(events& e, h2_limits limits)
    : events_(e), limits_(limits), blocks_(std::make_unique<block_pool>()) {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &callbacks::begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &callbacks::frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &callbacks::data_chunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, &callbacks::frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &callbacks::stream_close);
  // No HTTP messaging checks (RFC 9113 section 8: pseudo-headers, header characters,
  // content-length): a call is judged by its exact :path, grpc-timeout, grpc-encoding and its
  // length-prefixed message, no other header is read, and headers stay capped
  // (max_header_bytes). They were a fifth of nghttp2's instructions per call.
  nghttp2_option* opts = nullptr;
  if (nghttp2_option_new(&opts) != 0) {
    nghttp2_session_callbacks_del(cbs);
    throw std::bad_alloc();
  }
  nghttp2_option_set_no_http_messaging(opts, 1);
  // No closed streams kept, and no RFC 7540 priority tree (SETTINGS_NO_RFC7540_PRIORITIES):
  // they serve only the dependency tree, which orders nothing here (an answer is a few dozen
  // bytes, sent as soon as its flow-control window lets it), and cost every stream its place in
  // the tree and a closed stream's bookkeeping after it ends.
  nghttp2_option_set_no_closed_streams(opts, 1);
  const int rc = nghttp2_session_server_new3(&session_, cbs, this, opts, blocks_->mem());
  nghttp2_option_del(opts);
  nghttp2_session_callbacks_del(cbs);
  if (rc != 0) throw std::bad_alloc();
  const std::array<nghttp2_settings_entry, 3> settings{
      nghttp2_settings_entry{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_streams},
      nghttp2_settings_entry{NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
                             static_cast<std::uint32_t>(limits_.max_header_bytes)},
      nghttp2_settings_entry{NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
}

// nghttp2 frees its streams without calling back; streams_ frees ours after, and blocks_ what
// nghttp2 gave back.
h2_session::~h2_session() {
  nghttp2_session_del(session_);
}

bool h2_session::receive(const std::uint8_t* data, std::size_t size) {
  return nghttp2_session_mem_recv(session_, data, size) >= 0;
}

void h2_session::send(std::string& out, std::size_t max) {
  while (out.size() < max) {
    const std::uint8_t* data = nullptr;
    const auto n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) return;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

bool h2_session::alive() const {
  return nghttp2_session_want_read(session_) != 0 || nghttp2_session_want_write(session_) != 0;
}

void h2_session::answer(std::int32_t stream, std::string_view message) {
  auto* st = callbacks::stream_of(session_, *this, stream);
  if (!st || st->answered) return;
  st->answered = true;
  st->out.resize(5 + message.size());
  st->out[0] = 0;
  const auto size = static_cast<std::uint32_t>(message.size());
  st->out[1] = static_cast<char>(size >> 24);
  st->out[2] = static_cast<char>(size >> 16);
  st->out[3] = static_cast<char>(size >> 8);
  st->out[4] = static_cast<char>(size);
  std::memcpy(st->out.data() + 5, message.data(), message.size());
  const std::array<nghttp2_nv, 2> headers{header(":status", "200"),
                                          header("content-type", content_type)};
  nghttp2_data_provider provider{};
  provider.read_callback = &callbacks::read_answer;
  if (nghttp2_submit_response(session_, stream, headers.data(), headers.size(), &provider) != 0)
    return;
  st->answer_place = answers_++;
  st->unsent = true;
  ++unsent_;
}

std::optional<std::uint64_t> h2_session::oldest_unsent() const {
  std::optional<std::uint64_t> oldest;
  if (unsent_ == 0) return oldest;
  for (const auto& [id, st] : streams_)
    if (st->unsent && (!oldest || st->answer_place < *oldest)) oldest = st->answer_place;
  return oldest;
}

void h2_session::fail(std::int32_t stream, grpc_status status, std::string_view message) {
  auto* st = callbacks::stream_of(session_, *this, stream);
  if (!st || st->answered) return;
  st->answered = true;
  st->status_text = std::to_string(static_cast<int>(status));
  st->out = percent_encode(message);  // no message goes out: the field holds grpc-message
  const std::array<nghttp2_nv, 4> headers{
      header(":status", "200"), header("content-type", content_type),
      header("grpc-status", st->status_text), header("grpc-message", st->out)};
  nghttp2_submit_response(session_, stream, headers.data(), headers.size(), nullptr);
}

void h2_session::go_away() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

}  // namespace floodgate::service::envoy
