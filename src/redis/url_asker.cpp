#include "redis/url_asker.hpp"

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <map>

#include "redis/cluster_protocol.hpp"
#include "redis/resp_writer.hpp"
#include "redis/sentinel_answer.hpp"
#include "redis/stream.hpp"

namespace floodgate::redis {

namespace {

// One endpoint's connection, and what came back on it for the ask in progress.
struct link {
  link(boost::asio::io_context& io, stream_config c)
      : socket(io, std::move(c),
               {[this](reply& r) { replies.push_back(std::move(r)); },
                [this](const std::string& why) { closed = why; }}) {}

  std::vector<reply> replies;
  std::optional<std::string> closed;
  stream_link socket;
};

std::string link_name(const redis_endpoint& ep, url_asker::peer kind) {
  return (kind == url_asker::peer::sentinel ? "s " : "n ") + endpoint_label(ep);
}

}  // namespace

struct url_asker::impl {
  explicit impl(tls_context_result t) : tls(std::move(t)) {}
  ~impl() {
    // The sockets' cancelled handlers still name their links: run them before the links go.
    for (auto& [name, l] : links) l->socket.close();
    io.restart();
    io.run();
  }

  boost::asio::io_context io;  // run only inside exchange() and the destructor
  tls_context_result tls;
  std::atomic<bool> stopped{false};
  std::map<std::string, std::unique_ptr<link>> links;  // last: closed before io goes
};

url_asker::url_asker(std::string_view url, std::chrono::milliseconds timeout) : timeout_(timeout) {
  if (!parse_topology(url, options_, target_, why_not_)) return;
  impl_ =
      std::make_unique<impl>(target_.tls() ? make_tls_context(options_.tls) : tls_context_result{});
}

url_asker::~url_asker() = default;

std::optional<std::string> url_asker::exchange(
    const redis_endpoint& ep, peer kind, const std::vector<command>& commands,
    std::chrono::steady_clock::time_point until,
    const std::function<bool(const std::vector<reply>&)>& enough, std::vector<reply>& replies) {
  auto& s = *impl_;
  auto& slot = s.links[link_name(ep, kind)];
  if (!slot)
    slot = std::make_unique<link>(s.io, kind == peer::node
                                            ? node_stream_config(ep, options_, s.tls)
                                            : sentinel_stream_config(ep, options_, s.tls));
  auto& l = *slot;
  if (!l.socket.is_open()) {
    l.socket.config().connect_timeout = timeout_;
    l.socket.open();
  }
  std::string out;
  for (const auto& c : commands) {
    append_array_header(out, c.size());
    for (const auto& arg : c) append_bulk(out, std::string_view(arg));
  }
  l.replies.clear();
  l.closed.reset();
  if (!out.empty()) l.socket.send(out);
  s.io.restart();
  while (!enough(l.replies) && !l.closed && !s.stopped.load())
    if (s.io.run_one_until(until) == 0) break;  // the deadline, or stop()
  replies = std::move(l.replies);
  l.replies.clear();
  return l.closed;
}

std::vector<reply> url_asker::ask_all(const redis_endpoint& ep, peer kind,
                                      const std::vector<command>& commands, std::string& error) {
  if (stopped()) {
    error = endpoint_label(ep) + ": stopped";
    return {};
  }
  const auto want = commands.size();
  std::vector<reply> replies;
  const auto closed = exchange(
      ep, kind, commands, std::chrono::steady_clock::now() + timeout_,
      [want](const std::vector<reply>& r) { return r.size() >= want; }, replies);
  if (replies.size() < want) {
    error = closed      ? *closed
            : stopped() ? endpoint_label(ep) + ": stopped"
                        : endpoint_label(ep) + ": no answer within " +
                              std::to_string(timeout_.count()) + " ms";
    close(ep, kind);  // a late reply must not answer the next question
    return {};
  }
  return replies;
}

void url_asker::close(const redis_endpoint& ep, peer kind) {
  // The link stays (a few hundred bytes per endpoint ever asked): its socket's cancelled
  // handlers may still be queued, and run at the next ask, finding the connection gone.
  if (const auto it = impl_->links.find(link_name(ep, kind)); it != impl_->links.end())
    it->second->socket.close();
}

// Every sentinel asked SENTINEL MASTER and get-master-addr-by-name in one write; the newest
// configuration wins (sentinel_answer.hpp).
bool url_asker::find_nodes(std::string& error) {
  if (target_.what != topology::kind::sentinel) return true;
  const auto& cfg = target_.sentinel;
  const command epoch_question{"SENTINEL", "MASTER", cfg.master_name};
  const command address_question{"SENTINEL", "get-master-addr-by-name", cfg.master_name};
  std::vector<sentinel_answer> answers;
  for (const auto& s : cfg.sentinels) {
    std::string why;
    auto replies = ask_all(s, peer::sentinel, {epoch_question, address_question}, why);
    if (replies.empty()) {
      error += (error.empty() ? "" : "; ") + why;
      continue;
    }
    const auto& r = replies.back();  // the address; the epoch before it (none if refused)
    if (auto answer = read_answer(r, read_config_epoch(replies.front()), cfg.primary)) {
      answers.push_back(std::move(*answer));
      continue;
    }
    why = endpoint_label(s) + ": " +
          (r.is_error()                 ? r.str
           : r.kind == reply::type::nil ? "no master named '" + cfg.master_name + "'"
                                        : std::string("unexpected answer"));
    error += (error.empty() ? "" : "; ") + why;
  }
  auto best = best_answer(answers);
  if (!best) {
    error = "no sentinel named the primary: " + error;
    return false;
  }
  auto& nodes = target_.nodes;
  if (nodes.empty() || nodes.front() != best->primary) {
    if (!nodes.empty()) close(nodes.front(), peer::node);
    nodes.assign(1, std::move(best->primary));
  }
  return true;
}

void url_asker::stop() {
  if (!impl_) return;
  impl_->stopped.store(true);
  impl_->io.stop();
}

bool url_asker::stopped() const noexcept {
  return impl_ && impl_->stopped.load();
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
    auto replies = asker_.ask_all(ep, peer::node, commands, why);
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
        asker_.close(ep, peer::node);
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
