// floodgate/redis_call.hpp: one command to the node that holds a key, over node_asker's
// connections. The routing is the inspector's (inspector.cpp's key_reader), per call.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/redis_call.hpp"
#include "redis/cluster_protocol.hpp"
#include "redis/node_asker.hpp"
#include "redis/topology.hpp"

namespace floodgate {
namespace {

using redis::endpoint_label;
using redis::redis_endpoint;
using redis::reply;

redis_value to_value(reply&& r) {
  redis_value v;
  v.kind = static_cast<redis_value::type>(r.kind);
  v.integer = r.integer;
  v.str = std::move(r.str);
  v.elements.reserve(r.elements.size());
  for (auto& e : r.elements) v.elements.push_back(to_value(std::move(e)));
  return v;
}

}  // namespace

static_assert(static_cast<int>(redis_value::type::array) == static_cast<int>(reply::type::array) &&
              static_cast<int>(redis_value::type::error) == static_cast<int>(reply::type::error) &&
              static_cast<int>(redis_value::type::nil) == static_cast<int>(reply::type::nil));

struct redis_caller::impl {
  std::chrono::milliseconds timeout{1000};
  std::string why_not;
  redis_options options;
  redis::topology target;
  std::unique_ptr<redis::node_asker> asker;
  std::optional<redis_endpoint> primary;  // Sentinel: the one named last

  // The nodes to start from: the URL's, or the primary the sentinels name now.
  bool start_nodes(std::vector<redis_endpoint>& nodes, std::string& error) {
    if (target.what != redis::topology::kind::sentinel) {
      nodes = target.nodes;
      return true;
    }
    auto p = redis::primary_from_sentinels(*asker, target.sentinel, timeout, error);
    if (!p) return false;
    if (primary && *primary != *p) asker->close(*primary, redis::node_asker::peer::node);
    primary = *p;
    nodes.assign(1, *p);
    return true;
  }

  redis_answer run(const std::vector<std::string>& c) {
    redis_answer out;
    std::vector<redis_endpoint> seeds;
    if (!start_nodes(seeds, out.error)) return out;
    const bool cluster = target.what == redis::topology::kind::cluster;
    std::size_t at = 0;
    std::optional<redis_endpoint> ask_node;
    bool found = false;  // a node answered: no more seed-hopping on failures
    std::string failures;
    for (int redirects = 0;;) {
      const redis_endpoint ep = ask_node ? *ask_node : seeds[at];
      std::vector<redis::node_asker::command> commands;
      if (ask_node) commands.push_back({"ASKING"});
      commands.push_back(c);
      std::string why;
      auto replies = asker->ask(ep, redis::node_asker::peer::node, commands, timeout, why);
      ask_node.reset();
      if (replies.empty()) {
        failures += (failures.empty() ? "" : "; ") + why;
        if (cluster && !found && at + 1 < seeds.size()) {
          ++at;
          continue;
        }
        out.error = failures;
        return out;
      }
      auto& r = replies.back();
      if (replies.size() == 2 && replies.front().is_error()) {
        out.error = endpoint_label(ep) + ": ASKING: " + replies.front().str;
        return out;
      }
      const auto moved = cluster && r.is_error() ? redis::parse_redirect(r.str) : std::nullopt;
      if (!moved) {
        out.node = endpoint_label(ep);
        if (r.is_error()) {
          out.error = out.node + ": " + c.front() + ": " + r.str;
          // A replica now (a failover): ask the sentinels again next time.
          if (primary && r.error_code() == "READONLY")
            asker->close(*primary, redis::node_asker::peer::node);
          return out;
        }
        out.value = to_value(std::move(r));
        return out;
      }
      if (++redirects > redis::max_cluster_redirects) {
        out.error = endpoint_label(ep) + ": still redirected after " +
                    std::to_string(redis::max_cluster_redirects) + " hops: " + r.str;
        return out;
      }
      auto next = seeds.front();  // credentials and TLS as every node's
      next.host = moved->host.empty() ? ep.host : moved->host;
      next.port = moved->port;
      found = true;
      if (moved->what == redis::redirect::kind::ask) {
        ask_node = next;
      } else {
        seeds.push_back(next);
        at = seeds.size() - 1;
      }
    }
  }
};

redis_caller::redis_caller(std::string_view url, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>()) {
  auto& s = *impl_;
  s.timeout = timeout;
  if (!redis::parse_topology(url, s.options, s.target, s.why_not)) return;
  s.asker = std::make_unique<redis::node_asker>(
      s.options,
      s.target.tls() ? redis::make_tls_context(s.options.tls) : redis::tls_context_result{});
}

redis_caller::~redis_caller() = default;

const std::string& redis_caller::why_not() const noexcept {
  return impl_->why_not;
}

const std::string& redis_caller::key_prefix() const noexcept {
  return impl_->options.key_prefix;
}

redis_answer redis_caller::call(std::string_view, const std::vector<std::string>& command) {
  if (!impl_->why_not.empty()) return {{}, impl_->why_not, {}};
  return impl_->run(command);
}

void redis_caller::stop() {
  if (impl_->asker) impl_->asker->stop();
}

}  // namespace floodgate
