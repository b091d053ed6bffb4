#include "redis_watch/raw_state.hpp"

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/cluster_protocol.hpp"
#include "redis/cluster_url.hpp"
#include "redis/connection.hpp"
#include "redis/key.hpp"
#include "redis/node_asker.hpp"
#include "redis/sentinel_client.hpp"
#include "redis/url.hpp"
#include "redis/url_options.hpp"

namespace floodgate::service {
namespace {

using redis::redis_endpoint;
using redis::reply;
using command = std::vector<std::string>;

using redis::endpoint_label;

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

// Where the key lives, and how to ask there.
class key_reader {
 public:
  key_reader(redis::node_asker& a, std::chrono::milliseconds timeout,
             std::vector<redis_endpoint> seeds, bool cluster)
      : asker_(a), timeout_(timeout), seeds_(std::move(seeds)), cluster_(cluster) {}

  // `c`'s reply from the node holding the key; nullopt with `error` set (the node named, the
  // server's words quoted) when there is none. Cluster: a seed that does not answer gives way
  // to the next (until one has); MOVED moves there for good, ASK asks there once.
  std::optional<reply> run(const command& c, std::string& error) {
    std::string failures;
    for (int redirects = 0;;) {
      // A copy: ask_node_ is reset and seeds_ may grow below.
      const redis_endpoint ep = ask_node_ ? *ask_node_ : seeds_[node_];
      std::vector<command> commands;
      if (ask_node_) commands.push_back({"ASKING"});
      commands.push_back(c);
      std::string why;
      auto replies = asker_.ask(ep, redis::node_asker::peer::node, commands, timeout_, why);
      ask_node_.reset();
      if (replies.empty()) {
        failures += (failures.empty() ? "" : "; ") + why;
        if (cluster_ && !found_ && node_ + 1 < seeds_.size()) {
          ++node_;  // another seed
          continue;
        }
        error = failures;
        return std::nullopt;
      }
      auto& r = replies.back();
      if (replies.size() == 2 && replies.front().is_error()) {
        error = endpoint_label(ep) + ": ASKING: " + replies.front().str;
        return std::nullopt;
      }
      const auto moved = cluster_ && r.is_error() ? redis::parse_redirect(r.str) : std::nullopt;
      if (!moved) {
        if (r.is_error()) {
          error = endpoint_label(ep) + ": " + c.front() + ": " + r.str;
          return std::nullopt;
        }
        found_ = true;
        node_name_ = endpoint_label(ep);
        return std::move(r);
      }
      if (++redirects > max_redirects) {
        error = endpoint_label(ep) + ": still redirected after " + std::to_string(max_redirects) +
                " hops: " + r.str;
        return std::nullopt;
      }
      auto target = seeds_.front();  // credentials and TLS as every node's
      target.host = moved->host.empty() ? ep.host : moved->host;
      target.port = moved->port;
      found_ = true;  // a node answered: the cluster is reachable, follow it
      if (moved->what == redis::redirect::kind::ask) {
        ask_node_ = target;
      } else {
        seeds_.push_back(target);
        node_ = seeds_.size() - 1;
      }
    }
  }
  const std::string& node_name() const noexcept { return node_name_; }

 private:
  redis::node_asker& asker_;
  const std::chrono::milliseconds timeout_;
  std::vector<redis_endpoint> seeds_;  // the URL's nodes, then those MOVED named
  bool cluster_;
  std::size_t node_ = 0;  // asked next
  std::optional<redis_endpoint> ask_node_;
  bool found_ = false;  // a node has answered: no more seed-hopping on failures
  std::string node_name_;
};

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
  if (redis::iequals_prefix(url, "memory:") || url == "memory") {
    s.why_not = "memory:// keeps state inside the process, not in Redis";
    return s;
  }
  // The backend's own reading of the URL: options (key_prefix, TLS files, the sentinels'
  // credentials) and nodes.
  redis_options ro;
  std::vector<redis_endpoint> nodes;
  std::optional<redis::sentinel_config> sentinel;
  bool cluster = false;
  try {
    const auto base = redis::apply_url_options(url, ro);
    if (redis::is_cluster_url(base)) {
      nodes = redis::parse_cluster_url(base);
      cluster = true;
    } else if (redis::is_sentinel_url(base)) {
      sentinel = redis::parse_sentinel_url(base);
    } else if (redis::iequals_prefix(base, "redis://") ||
               redis::iequals_prefix(base, "rediss://")) {
      nodes.push_back(redis::parse_redis_url(base));
    } else {
      s.why_not = "not a Redis URL: " + redis::redact_url(url);
      return s;
    }
  } catch (const std::exception& e) {
    s.readable = true;
    s.error = e.what();
    return s;
  }
  s.readable = true;
  s.redis_key = redis::state_key({ro.key_prefix, ro.max_plain_key_size}, p, key);
  const bool tls = sentinel ? sentinel->primary.tls : nodes.front().tls;
  redis::node_asker a(ro, tls ? redis::make_tls_context(ro.tls) : redis::tls_context_result{});
  if (sentinel) {
    auto primary = redis::primary_from_sentinels(a, *sentinel, timeout, s.error);
    if (!primary) return s;
    nodes.push_back(std::move(*primary));
  }
  key_reader k(a, timeout, std::move(nodes), cluster);
  auto cmd = [&](command c) {
    auto r = k.run(c, s.error);
    if (r && !k.node_name().empty()) s.node = k.node_name();
    return r;
  };
  const auto type = cmd({"TYPE", s.redis_key});
  if (!type) return s;
  s.type = describe(*type);
  std::optional<reply> value;
  if (s.type == "string")
    value = cmd({"GET", s.redis_key});
  else if (s.type == "hash")
    value = cmd({"HGETALL", s.redis_key});
  else if (s.type == "zset")
    value = cmd({"ZRANGE", s.redis_key, "0", "9", "WITHSCORES"});
  if (!s.error.empty()) return s;
  if (value) s.value = describe(*value);
  if (s.type == "zset") {
    const auto n = cmd({"ZCARD", s.redis_key});
    if (!n) return s;
    s.members = n->kind == reply::type::integer ? n->integer : -1;
  }
  const auto ttl = cmd({"PTTL", s.redis_key});
  if (!ttl) return s;
  s.ttl_ms = ttl->kind == reply::type::integer ? ttl->integer : -2;
  return s;
}

}  // namespace floodgate::service
