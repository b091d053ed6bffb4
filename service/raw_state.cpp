#include "raw_state.hpp"

#include <hiredis/hiredis.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/key.hpp"
#include "redis/url.hpp"
#include "redis/url_options.hpp"

namespace floodgate::service {
namespace {

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

std::string describe(const redisReply* r) {
  if (!r) return "(no reply)";
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      return printable(std::string_view(r->str, r->len));
    case REDIS_REPLY_ERROR:
      return "error: " + std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string out;
      for (std::size_t i = 0; i < r->elements; ++i) out += (i ? " " : "") + describe(r->element[i]);
      return out;
    }
    default:
      return "(reply type " + std::to_string(r->type) + ")";
  }
}

std::int64_t integer_of(const redisReply* r, std::int64_t otherwise) {
  return r && r->type == REDIS_REPLY_INTEGER ? r->integer : otherwise;
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

raw_state read_raw_state(const std::string& url, const policy& p, std::string_view key,
                         std::chrono::milliseconds timeout) {
  raw_state s;
  if (!redis::iequals_prefix(url, "redis://")) {
    s.why_not = redis::iequals_prefix(url, "memory://")
                    ? "memory:// keeps state inside the process, not in Redis"
                    : "raw state is read for redis:// URLs only (not cluster, Sentinel or TLS)";
    return s;
  }
  redis_options ro;
  const auto base = redis::apply_url_options(url, ro);
  const auto ep = redis::parse_redis_url(base);
  if (ep.tls) {
    s.why_not = "not read over TLS";
    return s;
  }
  s.readable = true;
  s.redis_key = redis::state_key({ro.key_prefix, ro.max_plain_key_size}, p, key);
  const timeval tv{static_cast<time_t>(timeout.count() / 1000),
                   static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(
      redisConnectWithTimeout(ep.host.c_str(), ep.port, tv), redisFree);
  if (!c || c->err) {
    s.error = "cannot connect to " + redis::redact_url(url) +
              (c ? std::string(": ") + c->errstr : std::string());
    return s;
  }
  redisSetTimeout(c.get(), tv);
  auto cmd = [&](std::vector<std::string> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return reply_ptr(static_cast<redisReply*>(
        redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
  };
  if (ep.password) {
    auto r = ep.user.empty() ? cmd({"AUTH", *ep.password}) : cmd({"AUTH", ep.user, *ep.password});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      s.error = "AUTH failed: " + describe(r.get());
      return s;
    }
  }
  if (ep.db != 0) cmd({"SELECT", std::to_string(ep.db)});
  const auto type = cmd({"TYPE", s.redis_key});
  if (!type || type->type == REDIS_REPLY_ERROR) {
    s.error = type ? describe(type.get()) : "no reply: " + std::string(c->errstr);
    return s;
  }
  s.type = describe(type.get());
  reply_ptr value;
  if (s.type == "string")
    value = cmd({"GET", s.redis_key});
  else if (s.type == "hash")
    value = cmd({"HGETALL", s.redis_key});
  else if (s.type == "zset")
    value = cmd({"ZRANGE", s.redis_key, "0", "9", "WITHSCORES"});
  if (value) s.value = describe(value.get());
  if (s.type == "zset") s.members = integer_of(cmd({"ZCARD", s.redis_key}).get(), -1);
  s.ttl_ms = integer_of(cmd({"PTTL", s.redis_key}).get(), -2);
  return s;
}

}  // namespace floodgate::service
