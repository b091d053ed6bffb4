// floodgate/redis_call.hpp's redis_subscription: a SUBSCRIBE on a url_asker's connection, read
// only inside wait() (url_asker::exchange), so messages are read by the thread that waits.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodgate/redis_call.hpp"
#include "redis/url_asker.hpp"

namespace floodgate {

using redis::endpoint_label;
using redis::redis_endpoint;
using redis::reply;
using peer = redis::url_asker::peer;

namespace {

// ["subscribe", channel, n] once, then ["message", channel, payload] per PUBLISH.
bool is(const reply& r, std::string_view kind) {
  return r.kind == reply::type::array && r.elements.size() == 3 && r.elements[0].str == kind;
}

}  // namespace

struct redis_subscription::impl {
  impl(std::string_view url, std::string c, std::chrono::milliseconds t)
      : timeout(t), channel(std::move(c)), asker(url, t) {}

  std::chrono::milliseconds timeout;
  std::string channel;
  redis::url_asker asker;  // the node: the URL's, a Cluster's seeds in turn, the primary now
  std::size_t seed = 0;    // Cluster: the seed tried next
  std::optional<redis_endpoint> at;  // subscribed there (SUBSCRIBE's reply came), not closed
  bool confirmed = false;
  std::vector<std::string> payloads;

  void on_reply(reply& r) {
    if (r.kind != reply::type::array || r.elements.size() != 3) return;
    const auto& kind = r.elements[0].str;
    if (kind == "subscribe") confirmed = true;
    if (kind == "message") payloads.push_back(std::move(r.elements[2].str));
  }

  // Reads into payloads until `enough`, `until` or a close (its why).
  template <class F>
  std::optional<std::string> read(const redis_endpoint& ep, std::vector<std::string> command,
                                  std::chrono::steady_clock::time_point until, F enough) {
    std::vector<reply> got;
    std::vector<redis::url_asker::command> commands;
    if (!command.empty()) commands.push_back(std::move(command));
    auto closed = asker.exchange(
        ep, peer::node, commands, until,
        [&](const std::vector<reply>& rs) { return std::any_of(rs.begin(), rs.end(), enough); },
        got);
    for (auto& r : got) on_reply(r);
    return closed;
  }

  std::string subscribe() {
    std::string error;
    if (!asker.find_nodes(error)) return error;
    const auto ep = asker.nodes()[seed++ % asker.nodes().size()];
    confirmed = false;
    const auto closed = read(ep, {"SUBSCRIBE", channel}, std::chrono::steady_clock::now() + timeout,
                             [](const reply& r) { return is(r, "subscribe"); });
    if (confirmed) {
      at = ep;
      return {};
    }
    asker.close(ep, peer::node);
    return closed            ? *closed
           : asker.stopped() ? endpoint_label(ep) + ": stopped"
                             : endpoint_label(ep) + ": SUBSCRIBE not confirmed within " +
                                   std::to_string(timeout.count()) + " ms";
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
  if (s.asker.stopped()) return out;
  const auto deadline = std::chrono::steady_clock::now() + for_at_most;
  if (!s.at) {
    out.error = s.subscribe();
    if (!out.error.empty()) return out;
  }
  std::optional<std::string> closed;
  if (s.payloads.empty())
    closed = s.read(*s.at, {}, deadline, [](const reply& r) { return is(r, "message"); });
  out.payloads = std::move(s.payloads);
  s.payloads.clear();
  if (closed) {
    out.error = *closed;
    s.at.reset();
  }
  return out;
}

bool redis_subscription::subscribed() const noexcept {
  return impl_->at.has_value();
}

void redis_subscription::stop() {
  impl_->asker.stop();
}

}  // namespace floodgate
