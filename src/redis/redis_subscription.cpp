// floodgate/redis_call.hpp's redis_subscription: one stream_link subscribed to one channel, its
// io run only inside wait() (as node_asker's), so messages are read by the thread that waits.
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/redis_call.hpp"
#include "redis/resp_writer.hpp"
#include "redis/stream.hpp"
#include "redis/url_asker.hpp"

namespace floodgate {

using redis::endpoint_label;
using redis::redis_endpoint;
using redis::reply;

struct redis_subscription::impl {
  impl(std::string_view url, std::string c, std::chrono::milliseconds t)
      : timeout(t), channel(std::move(c)), asker(url, t) {
    if (asker.why_not().empty() && asker.target().tls())
      tls = redis::make_tls_context(asker.options().tls);
  }

  std::chrono::milliseconds timeout;
  std::string channel;
  redis::url_asker asker;  // the node: the URL's, a Cluster's seeds in turn, the primary now
  redis::tls_context_result tls;
  boost::asio::io_context io;  // run only inside wait() and the destructor
  std::atomic<bool> stopped{false};
  bool confirmed = false;  // SUBSCRIBE's reply came
  std::size_t seed = 0;    // Cluster: the seed tried next
  std::vector<std::string> payloads;
  std::optional<std::string> closed;
  std::unique_ptr<redis::stream_link> link;  // last: closed before io goes

  ~impl() {
    if (link) link->close();
    io.restart();
    io.run();
  }

  void on_reply(reply& r) {
    // ["subscribe", channel, n] once, then ["message", channel, payload] per PUBLISH.
    if (r.kind != reply::type::array || r.elements.size() != 3) return;
    const auto& kind = r.elements[0].str;
    if (kind == "subscribe") confirmed = true;
    if (kind == "message") payloads.push_back(std::move(r.elements[2].str));
  }

  // Where to subscribe now, or nullopt with `error`.
  std::optional<redis_endpoint> endpoint(std::string& error) {
    if (!asker.find_nodes(error)) return std::nullopt;
    return asker.nodes()[seed++ % asker.nodes().size()];
  }

  // Runs the io until `done`, a close, stop() or `deadline`.
  template <class F>
  void run_until(std::chrono::steady_clock::time_point deadline, F done) {
    io.restart();
    while (!done() && !closed && !stopped.load())
      if (io.run_one_until(deadline) == 0) break;
  }

  std::string subscribe() {
    std::string error;
    const auto ep = endpoint(error);
    if (!ep) return error;
    redis::stream_config c = redis::sentinel_stream_config(*ep, asker.options(), tls);
    c.greeting.user = ep->user;  // a node's own credentials and db, as node_asker's
    c.greeting.password = ep->password;
    c.greeting.db = ep->db;
    c.peer = "the server";
    c.connect_timeout = timeout;
    if (link) {
      // The old link's handlers still queued (a write or read finishing, aborted by the close)
      // run now, while it is alive: replaced first, they read it freed (ASan: heap-use-after-free
      // in stream.cpp's write handler after a server closed the subscription).
      link->close();
      io.restart();
      io.run();
    }
    link = std::make_unique<redis::stream_link>(
        io, std::move(c),
        redis::stream_link::handlers{[this](reply& r) { on_reply(r); },
                                     [this](const std::string& why) { closed = why; }});
    confirmed = false;
    closed.reset();
    link->open();
    std::string out;
    redis::append_array_header(out, 2);
    redis::append_bulk(out, std::string_view("SUBSCRIBE"));
    redis::append_bulk(out, std::string_view(channel));
    link->send(out);
    run_until(std::chrono::steady_clock::now() + timeout, [this] { return confirmed; });
    if (confirmed) return {};
    const auto why = closed           ? *closed
                     : stopped.load() ? endpoint_label(*ep) + ": stopped"
                                      : endpoint_label(*ep) + ": SUBSCRIBE not confirmed within " +
                                            std::to_string(timeout.count()) + " ms";
    link->close();
    return why;
  }
};

redis_subscription::redis_subscription(std::string_view url, std::string channel,
                                       std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(url, std::move(channel), timeout)) {}

redis_subscription::~redis_subscription() = default;

redis_subscription::messages redis_subscription::wait(std::chrono::milliseconds for_at_most) {
  auto& s = *impl_;
  messages out;
  if (!s.asker.why_not().empty()) {
    out.error = s.asker.why_not();
    return out;
  }
  if (s.stopped.load()) return out;
  const auto deadline = std::chrono::steady_clock::now() + for_at_most;
  if (!s.confirmed || s.closed) {
    out.error = s.subscribe();
    if (!out.error.empty()) {
      s.confirmed = false;
      return out;
    }
  }
  s.run_until(deadline, [&s] { return !s.payloads.empty(); });
  out.payloads = std::move(s.payloads);
  s.payloads.clear();
  if (s.closed) {
    out.error = *s.closed;
    s.confirmed = false;
  }
  return out;
}

bool redis_subscription::subscribed() const noexcept {
  return impl_->confirmed && !impl_->closed;
}

void redis_subscription::stop() {
  impl_->stopped.store(true);
  impl_->io.stop();
  impl_->asker.stop();
}

}  // namespace floodgate
