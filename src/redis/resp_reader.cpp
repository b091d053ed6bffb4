#include "redis/resp_reader.hpp"

#include <hiredis/read.h>

#include <memory>
#include <new>

namespace floodgate::redis {

// hiredis builds replies through these callbacks, so replies land directly in our own type:
// a child is constructed in place inside its parent's elements, and only roots are owned
// (hiredis frees only the root of an abandoned reply, through free_object).
struct reader_callbacks {
  static reply* place(const redisReadTask* task) noexcept {
    if (task->parent == nullptr) return new (std::nothrow) reply;
    auto* parent = static_cast<reply*>(task->parent->obj);
    return &parent->elements[static_cast<std::size_t>(task->idx)];
  }
  static void abandon(const redisReadTask* task, reply* r) noexcept {
    if (task->parent == nullptr) delete r;
  }

  static void* create_string(const redisReadTask* task, char* str, size_t len) noexcept {
    reply* r = place(task);
    if (r == nullptr) return nullptr;
    r->kind = task->type == REDIS_REPLY_ERROR    ? reply::type::error
              : task->type == REDIS_REPLY_STATUS ? reply::type::status
                                                 : reply::type::string;
    try {
      r->str.assign(str, len);
    } catch (const std::bad_alloc&) {
      abandon(task, r);
      return nullptr;  // hiredis reports it as out of memory: a sticky reader error
    }
    return r;
  }

  static void* create_array(const redisReadTask* task, int elements) noexcept {
    auto* self = static_cast<resp_reader*>(task->privdata);
    // Every element takes at least 3 bytes on the wire ("+\r\n"), so a reply announcing more
    // than max_reply_size / 3 elements in total can only break the cap: refuse it before
    // allocating for it, or a 13-byte header could ask for gigabytes.
    if (elements < 0 ||
        static_cast<std::size_t>(elements) > self->max_reply_size_ / 3 - self->elements_) {
      self->fail("array of " + std::to_string(elements) + " elements exceeds max_reply_size");
      return nullptr;
    }
    self->elements_ += static_cast<std::size_t>(elements);
    reply* r = place(task);
    if (r == nullptr) return nullptr;
    r->kind = reply::type::array;
    try {
      r->elements.resize(static_cast<std::size_t>(elements));
    } catch (const std::bad_alloc&) {
      abandon(task, r);
      return nullptr;
    }
    return r;
  }

  static void* create_integer(const redisReadTask* task, long long value) noexcept {
    reply* r = place(task);
    if (r == nullptr) return nullptr;
    r->kind = reply::type::integer;
    r->integer = value;
    return r;
  }

  static void* create_nil(const redisReadTask* task) noexcept {
    reply* r = place(task);
    if (r == nullptr) return nullptr;
    r->kind = reply::type::nil;
    return r;
  }

  static void free_object(void* root) noexcept { delete static_cast<reply*>(root); }

  static inline redisReplyObjectFunctions functions = {create_string, create_array, create_integer,
                                                       create_nil, free_object};
};

resp_reader::resp_reader(std::size_t max_reply_size)
    : reader_(redisReaderCreateWithFunctions(&reader_callbacks::functions)),
      max_reply_size_(max_reply_size) {
  if (reader_ == nullptr) throw std::bad_alloc();
  reader_->privdata = this;  // (hiredis 0.14's redisReaderSetPrivdata casts to int)
}

resp_reader::~resp_reader() {
  redisReaderFree(reader_);
}

void resp_reader::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

resp_reader::result resp_reader::too_big() {
  fail("reply exceeds max_reply_size (" + std::to_string(max_reply_size_) + " bytes)");
  return result::error;
}

void resp_reader::feed(std::string_view bytes) {
  if (failed() || bytes.empty()) return;
  fed_ += bytes.size();
  if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK)
    fail(reader_->errstr[0] ? reader_->errstr : "out of memory");
}

resp_reader::result resp_reader::next(reply& out) {
  if (failed()) return result::error;
  void* obj = nullptr;
  if (redisReaderGetReply(reader_, &obj) != REDIS_OK) {
    // Our own cap (set by create_array) explains it better than hiredis's "Out of memory".
    fail(reader_->errstr);
    return result::error;
  }
  if (obj != nullptr) {
    std::unique_ptr<reply> r(static_cast<reply*>(obj));
    const std::uint64_t end = fed_ - (reader_->len - reader_->pos);  // minus what is buffered
    if (end - reply_begin_ > max_reply_size_) return too_big();
    out = std::move(*r);
    reply_begin_ = end;
    elements_ = 0;
    return result::ready;
  }
  // Everything fed since the last complete reply belongs to the one in progress: refuse it
  // as soon as it outgrows the cap, without buffering the rest.
  if (fed_ - reply_begin_ > max_reply_size_) return too_big();
  return result::need_more;
}

}  // namespace floodgate::redis
