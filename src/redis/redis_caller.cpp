// floodgate/redis_call.hpp over url_asker.hpp, as the inspection API asks: redis_caller (one
// command to the node that holds a key) and redis_subscription (a SUBSCRIBE on a url_asker's
// connection, read only inside wait(), by url_asker::exchange, so by the thread that waits).
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

struct redis_caller::impl : redis::url_asker {
  using url_asker::url_asker;
};

redis_caller::redis_caller(std::string_view url, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(url, timeout)) {}

redis_caller::~redis_caller() = default;

const std::string& redis_caller::why_not() const noexcept {
  return impl_->why_not();
}

const std::string& redis_caller::key_prefix() const noexcept {
  return impl_->options().key_prefix;
}

redis_answer redis_caller::call(std::string_view, const std::vector<std::string>& command) {
  auto& u = *impl_;
  redis_answer out;
  if (!u.why_not().empty()) {
    out.error = u.why_not();
    return out;
  }
  if (!u.find_nodes(out.error)) return out;
  redis::url_asker::key_reader k(u);
  auto r = k.run(command, out.error);
  out.node = k.node_name();
  if (r) out.value = std::move(*r);
  return out;
}

void redis_caller::stop() {
  impl_->stop();
}

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
    if (is(r, "subscribe")) confirmed = true;
    if (is(r, "message")) payloads.push_back(std::move(r.elements[2].str));
  }

  // Writes `commands`, then reads into payloads until a reply of `kind`, `until` or a close
  // (its why).
  std::optional<std::string> read(const redis_endpoint& ep,
                                  const std::vector<redis::url_asker::command>& commands,
                                  std::chrono::steady_clock::time_point until,
                                  std::string_view kind) {
    std::vector<reply> got;
    auto closed = asker.exchange(
        ep, peer::node, commands, until,
        [&](const std::vector<reply>& rs) {
          return std::any_of(rs.begin(), rs.end(), [&](const reply& r) { return is(r, kind); });
        },
        got);
    for (auto& r : got) on_reply(r);
    return closed;
  }

  std::string subscribe() {
    std::string error;
    if (!asker.find_nodes(error)) return error;
    const auto ep = asker.nodes()[seed++ % asker.nodes().size()];
    confirmed = false;
    const auto closed =
        read(ep, {{"SUBSCRIBE", channel}}, std::chrono::steady_clock::now() + timeout, "subscribe");
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
  if (s.payloads.empty()) closed = s.read(*s.at, {}, deadline, "message");
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
