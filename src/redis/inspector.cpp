// floodgate/inspect.hpp: questions to the nodes behind a URL, over node_asker's connections.
#include <charconv>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/inspect.hpp"
#include "redis/cluster_protocol.hpp"
#include "redis/key.hpp"
#include "redis/node_asker.hpp"
#include "redis/topology.hpp"

namespace floodgate {
namespace {

using redis::endpoint_label;
using redis::redis_endpoint;
using redis::reply;
using command = redis::node_asker::command;

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

// Where a key lives, and how to ask there.
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
      if (++redirects > redis::max_cluster_redirects) {
        error = endpoint_label(ep) + ": still redirected after " +
                std::to_string(redis::max_cluster_redirects) + " hops: " + r.str;
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

bool is_memory_url(std::string_view url) noexcept {
  return redis::iequals_prefix(url, "memory:") || url == "memory";
}

}  // namespace

struct redis_inspector::impl {
  std::chrono::milliseconds timeout;
  bool names_redis = false;
  std::string why_not;
  redis_options options;  // the URL's: key_prefix, TLS files, the sentinels' credentials
  redis::topology target;
  std::unique_ptr<redis::node_asker> asker;  // when why_not is empty
  std::vector<redis_endpoint> nodes;         // what nodes() named last

  // The primary the sentinels name now; the last one named stays in `nodes` when none does.
  std::string follow_primary() {
    std::string error;
    auto primary = redis::primary_from_sentinels(*asker, target.sentinel, timeout, error);
    if (!primary) return error;
    if (nodes.empty() || nodes.front() != *primary) {
      // A primary that is one no more: its connection goes.
      if (!nodes.empty()) asker->close(nodes.front(), redis::node_asker::peer::node);
      nodes.assign(1, std::move(*primary));
    }
    return {};
  }

  const redis_endpoint* find(std::string_view label) const {
    for (const auto& n : nodes)
      if (endpoint_label(n) == label) return &n;
    return nullptr;
  }

  // `c`'s reply from `label`; nullopt with `error` set (the server's words for an error reply).
  std::optional<reply> ask(std::string_view label, command c, std::string& error) {
    if (!why_not.empty()) {
      error = why_not;
      return std::nullopt;
    }
    const auto* ep = find(label);
    if (!ep) {
      error = std::string(label) + ": not a node of this URL (nodes() names them)";
      return std::nullopt;
    }
    auto replies = asker->ask(*ep, redis::node_asker::peer::node, {std::move(c)}, timeout, error);
    if (replies.empty()) return std::nullopt;
    if (replies.front().is_error()) {
      error = replies.front().str;
      return std::nullopt;
    }
    return std::move(replies.front());
  }
};

redis_inspector::redis_inspector(std::string_view url, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>()) {
  auto& s = *impl_;
  s.timeout = timeout;
  if (is_memory_url(url)) {
    s.why_not = "memory:// keeps state inside the process, not in Redis";
    return;
  }
  s.names_redis = redis::is_redis_url(url);
  if (!redis::parse_topology(url, s.options, s.target, s.why_not)) return;
  const bool tls = s.target.tls();
  s.asker = std::make_unique<redis::node_asker>(
      s.options, tls ? redis::make_tls_context(s.options.tls) : redis::tls_context_result{});
  if (s.target.what != redis::topology::kind::sentinel) s.nodes = s.target.nodes;
}

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
  out.redis_key = redis::state_key({s.options.key_prefix, s.options.max_plain_key_size}, p, key);
  std::vector<redis_endpoint> nodes = s.target.nodes;
  if (s.target.what == redis::topology::kind::sentinel) {
    out.error = s.follow_primary();
    if (!out.error.empty()) return out;
    nodes = s.nodes;
  }
  key_reader k(*s.asker, s.timeout, std::move(nodes),
               s.target.what == redis::topology::kind::cluster);
  auto cmd = [&](command c) {
    auto r = k.run(c, out.error);
    if (r && !k.node_name().empty()) out.node = k.node_name();
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
  if (s.target.what == redis::topology::kind::sentinel) out.error = s.follow_primary();
  for (const auto& n : s.nodes) out.nodes.push_back(endpoint_label(n));
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
    for (std::size_t i = 0; i < 2; ++i) {
      const auto& e = r->elements[i].str;
      const auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), parts[i]);
      if (ec != std::errc{} || end != e.data() + e.size()) parts[i] = -1;
    }
  if (parts[0] < 0 || parts[1] < 0) {
    out.error = std::string(node) + ": TIME: not two numbers";
    return out;
  }
  out.since_epoch = std::chrono::seconds(parts[0]) + std::chrono::microseconds(parts[1]);
  return out;
}

void redis_inspector::stop() {
  if (impl_->asker) impl_->asker->stop();
}

raw_state read_raw_state(std::string_view url, const policy& p, std::string_view key,
                         std::chrono::milliseconds timeout) {
  return redis_inspector(url, timeout).read_state(p, key);
}

}  // namespace floodgate
