#include "redis/node_asker.hpp"

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <map>
#include <optional>

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

std::string link_name(const redis_endpoint& ep, node_asker::peer kind) {
  return (kind == node_asker::peer::sentinel ? "s " : "n ") + endpoint_label(ep);
}

}  // namespace

struct node_asker::impl {
  impl(const redis_options& o, tls_context_result t) : options(o), tls(std::move(t)) {}
  ~impl() {
    // The sockets' cancelled handlers still name their links: run them before the links go.
    for (auto& [name, l] : links) l->socket.close();
    io.restart();
    io.run();
  }

  link& link_to(const redis_endpoint& ep, peer kind) {
    auto& slot = links[link_name(ep, kind)];
    if (slot) return *slot;
    slot =
        std::make_unique<link>(io, kind == peer::node ? node_stream_config(ep, options, tls)
                                                      : sentinel_stream_config(ep, options, tls));
    return *slot;
  }

  boost::asio::io_context io;  // run only inside ask() and the destructor
  redis_options options;
  tls_context_result tls;
  std::atomic<bool> stopped{false};
  std::map<std::string, std::unique_ptr<link>> links;  // last: closed before io goes
};

node_asker::node_asker(const redis_options& options, tls_context_result tls)
    : impl_(std::make_unique<impl>(options, std::move(tls))) {}

node_asker::~node_asker() = default;

std::vector<reply> node_asker::ask(const redis_endpoint& ep, peer kind,
                                   const std::vector<command>& commands,
                                   std::chrono::milliseconds timeout, std::string& error) {
  auto& s = *impl_;
  if (s.stopped.load()) {
    error = endpoint_label(ep) + ": stopped";
    return {};
  }
  auto& l = s.link_to(ep, kind);
  if (!l.socket.is_open()) {
    l.socket.config().connect_timeout = timeout;
    l.socket.open();
  }
  std::string out;
  for (const auto& c : commands) {
    append_array_header(out, c.size());
    for (const auto& arg : c) append_bulk(out, std::string_view(arg));
  }
  l.replies.clear();
  l.closed.reset();
  l.socket.send(out);
  const auto want = commands.size();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  s.io.restart();
  while (l.replies.size() < want && !l.closed && !s.stopped.load())
    if (s.io.run_one_until(deadline) == 0) break;  // the deadline, or stop()
  if (l.replies.size() < want) {
    error = l.closed           ? *l.closed
            : s.stopped.load() ? endpoint_label(ep) + ": stopped"
                               : endpoint_label(ep) + ": no answer within " +
                                     std::to_string(timeout.count()) + " ms";
    l.socket.close();  // a late reply must not answer the next question
    return {};
  }
  return std::move(l.replies);
}

void node_asker::close(const redis_endpoint& ep, peer kind) {
  // The link stays (a few hundred bytes per endpoint ever asked): its socket's cancelled
  // handlers may still be queued, and run at the next ask, finding the connection gone.
  if (const auto it = impl_->links.find(link_name(ep, kind)); it != impl_->links.end())
    it->second->socket.close();
}

void node_asker::stop() {
  impl_->stopped.store(true);
  impl_->io.stop();
}

std::optional<redis_endpoint> primary_from_sentinels(node_asker& a, const sentinel_config& cfg,
                                                     std::chrono::milliseconds timeout,
                                                     std::string& error) {
  const node_asker::command epoch_question{"SENTINEL", "MASTER", cfg.master_name};
  const node_asker::command address_question{"SENTINEL", "get-master-addr-by-name",
                                             cfg.master_name};
  std::vector<sentinel_answer> answers;
  for (const auto& s : cfg.sentinels) {
    std::string why;
    auto replies =
        a.ask(s, node_asker::peer::sentinel, {epoch_question, address_question}, timeout, why);
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
  if (auto best = best_answer(answers)) return std::move(best->primary);
  error = "no sentinel named the primary: " + error;
  return std::nullopt;
}

}  // namespace floodgate::redis
