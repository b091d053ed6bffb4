// floodgate/inspect.hpp: questions to the nodes behind a URL (url_asker.hpp).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/inspect.hpp"
#include "redis/key.hpp"
#include "redis/url.hpp"
#include "redis/url_asker.hpp"

namespace floodgate {
namespace {

using redis::endpoint_label;
using redis::reply;
using command = redis::url_asker::command;

std::string describe(const reply& r) {
  switch (r.kind) {
    case reply::type::string:
    case reply::type::status:
      return printable(r.str);
    case reply::type::error:
      return "error: " + printable(r.str);
    case reply::type::integer:
      return std::to_string(r.integer);
    case reply::type::nil:
      return "(nil)";
    case reply::type::array: {
      std::string out;
      for (std::size_t i = 0; i < r.elements.size(); ++i)
        out += (i ? " " : "") + describe(r.elements[i]);
      return out;
    }
  }
  return "(reply)";
}

}  // namespace

struct redis_inspector::impl {
  impl(std::string_view url, std::chrono::milliseconds timeout)
      : names_redis(redis::is_redis_url(url)),
        asker(url, timeout),
        why_not(redis::iequals_prefix(url, "memory:") || url == "memory"
                    ? "memory:// keeps state inside the process, not in Redis"
                    : asker.why_not()) {}

  bool names_redis;
  redis::url_asker asker;
  std::string why_not;

  // `c`'s reply from `label`; nullopt with `error` set (the server's words for an error reply).
  std::optional<reply> ask(std::string_view label, const command& c, std::string& error) {
    if (!why_not.empty()) {
      error = why_not;
      return std::nullopt;
    }
    const auto& nodes = asker.nodes();
    const auto ep = std::find_if(nodes.begin(), nodes.end(), [&](const auto& n) {
      return endpoint_label(n) == label;
    });
    if (ep == nodes.end()) {
      error = std::string(label) + ": not a node of this URL (nodes() names them)";
      return std::nullopt;
    }
    auto replies = asker.ask_all(*ep, redis::url_asker::peer::node, {c}, error);
    if (replies.empty()) return std::nullopt;
    if (replies.front().is_error()) {
      error = replies.front().str;
      return std::nullopt;
    }
    return std::move(replies.front());
  }
};

redis_inspector::redis_inspector(std::string_view url, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(url, timeout)) {}

redis_inspector::~redis_inspector() = default;

bool redis_inspector::names_redis() const noexcept {
  return impl_->names_redis;
}

const std::string& redis_inspector::why_not() const noexcept {
  return impl_->why_not;
}

raw_state redis_inspector::read_state(const policy& p, std::string_view key) {
  auto& s = *impl_;
  raw_state out;
  out.readable = s.names_redis;
  if (!s.names_redis) {
    out.why_not = s.why_not;
    return out;
  }
  if (!s.why_not.empty()) {
    out.error = s.why_not;
    return out;
  }
  const auto& options = s.asker.options();
  out.redis_key = redis::state_key({options.key_prefix, options.max_plain_key_size}, p, key);
  if (!s.asker.find_nodes(out.error)) return out;
  redis::url_asker::key_reader k(s.asker);
  auto cmd = [&](const command& c) {
    auto r = k.run(c, out.error);
    if (r) out.node = k.node_name();
    return r;
  };
  const auto type = cmd({"TYPE", out.redis_key});
  if (!type) return out;
  out.type = describe(*type);
  std::optional<reply> value;
  if (out.type == "string")
    value = cmd({"GET", out.redis_key});
  else if (out.type == "hash")
    value = cmd({"HGETALL", out.redis_key});
  else if (out.type == "zset")
    value = cmd({"ZRANGE", out.redis_key, "0", "9", "WITHSCORES"});
  if (!out.error.empty()) return out;
  if (value) out.value = describe(*value);
  if (out.type == "zset") {
    const auto n = cmd({"ZCARD", out.redis_key});
    if (!n) return out;
    out.members = n->kind == reply::type::integer ? n->integer : -1;
  }
  const auto ttl = cmd({"PTTL", out.redis_key});
  if (!ttl) return out;
  out.ttl_ms = ttl->kind == reply::type::integer ? ttl->integer : -2;
  return out;
}

node_list redis_inspector::nodes() {
  auto& s = *impl_;
  node_list out;
  if (!s.why_not.empty()) return out;
  s.asker.find_nodes(out.error);
  for (const auto& n : s.asker.nodes()) out.nodes.push_back(endpoint_label(n));
  return out;
}

node_info redis_inspector::info(std::string_view node, std::string_view section) {
  node_info out;
  auto r = impl_->ask(node, {"INFO", std::string(section)}, out.error);
  if (!r) return out;
  if (r->kind != reply::type::string)
    out.error = std::string(node) + ": INFO: not a text reply";
  else
    out.text = std::move(r->str);
  return out;
}

node_time redis_inspector::time(std::string_view node) {
  node_time out;
  auto r = impl_->ask(node, {"TIME"}, out.error);
  if (!r) return out;
  // Seconds and microseconds, as two strings.
  std::int64_t parts[2] = {-1, -1};
  if (r->kind == reply::type::array && r->elements.size() == 2)
    for (std::size_t i = 0; i < 2; ++i)
      parts[i] = redis::parse_number<std::int64_t>(r->elements[i].str).value_or(-1);
  if (parts[0] < 0 || parts[1] < 0) {
    out.error = std::string(node) + ": TIME: not two numbers";
    return out;
  }
  out.since_epoch = std::chrono::seconds(parts[0]) + std::chrono::microseconds(parts[1]);
  return out;
}

void redis_inspector::stop() {
  impl_->asker.stop();
}

raw_state read_raw_state(std::string_view url, const policy& p, std::string_view key,
                         std::chrono::milliseconds timeout) {
  return redis_inspector(url, timeout).read_state(p, key);
}

}  // namespace floodgate
