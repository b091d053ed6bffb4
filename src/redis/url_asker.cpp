#include "redis/url_asker.hpp"

#include "redis/cluster_protocol.hpp"
#include "redis/node_asker.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

url_asker::url_asker(std::string_view url, std::chrono::milliseconds timeout) : timeout_(timeout) {
  if (!parse_topology(url, options_, target_, why_not_)) return;
  asker_ = std::make_unique<node_asker>(
      options_, target_.tls() ? make_tls_context(options_.tls) : tls_context_result{});
  if (target_.what != topology::kind::sentinel) nodes_ = target_.nodes;
}

url_asker::~url_asker() = default;

bool url_asker::find_nodes(std::string& error) {
  if (target_.what != topology::kind::sentinel) return true;
  auto primary = primary_from_sentinels(*asker_, target_.sentinel, timeout_, error);
  if (!primary) return false;
  if (nodes_.empty() || nodes_.front() != *primary) {
    // A primary that is one no more: its connection goes.
    if (!nodes_.empty()) asker_->close(nodes_.front(), node_asker::peer::node);
    nodes_.assign(1, std::move(*primary));
  }
  return true;
}

std::optional<reply> url_asker::ask(const redis_endpoint& ep, const command& c,
                                    std::string& error) {
  auto replies = asker_->ask(ep, node_asker::peer::node, {c}, timeout_, error);
  if (replies.empty()) return std::nullopt;
  return std::move(replies.front());
}

void url_asker::stop() {
  if (asker_) asker_->stop();
}

std::optional<reply> url_asker::key_reader::run(const command& c, std::string& error) {
  const bool cluster = asker_.target_.what == topology::kind::cluster;
  std::string failures;
  for (int redirects = 0;;) {
    // A copy: ask_node_ is reset and seeds_ may grow below.
    const redis_endpoint ep = ask_node_ ? *ask_node_ : seeds_[node_];
    std::vector<command> commands;
    if (ask_node_) commands.push_back({"ASKING"});
    commands.push_back(c);
    std::string why;
    auto replies = asker_.asker_->ask(ep, node_asker::peer::node, commands, asker_.timeout_, why);
    ask_node_.reset();
    if (replies.empty()) {
      failures += (failures.empty() ? "" : "; ") + why;
      if (cluster && !found_ && node_ + 1 < seeds_.size()) {
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
    const auto moved = cluster && r.is_error() ? parse_redirect(r.str) : std::nullopt;
    if (!moved) {
      node_name_ = endpoint_label(ep);
      if (!r.is_error()) {
        found_ = true;
        return std::move(r);
      }
      error = node_name_ + ": " + c.front() + ": " + r.str;
      // A replica now (a failover): its connection goes, find_nodes() asks the sentinels again.
      if (asker_.target_.what == topology::kind::sentinel && r.error_code() == "READONLY")
        asker_.asker_->close(ep, node_asker::peer::node);
      return std::nullopt;
    }
    if (++redirects > max_cluster_redirects) {
      error = endpoint_label(ep) + ": still redirected after " +
              std::to_string(max_cluster_redirects) + " hops: " + r.str;
      return std::nullopt;
    }
    auto target = seeds_.front();  // credentials and TLS as every node's
    target.host = moved->host.empty() ? ep.host : moved->host;
    target.port = moved->port;
    found_ = true;  // a node answered: the cluster is reachable, follow it
    if (moved->what == redirect::kind::ask) {
      ask_node_ = target;
    } else {
      seeds_.push_back(target);
      node_ = seeds_.size() - 1;
    }
  }
}

}  // namespace floodgate::redis
