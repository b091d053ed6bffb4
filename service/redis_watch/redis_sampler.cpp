#include "redis_watch/redis_sampler.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "logging/log_format.hpp"
#include "redis/cluster_url.hpp"
#include "redis/connection.hpp"
#include "redis/node_asker.hpp"
#include "redis/sentinel_client.hpp"
#include "redis/url.hpp"
#include "redis/url_options.hpp"
#include "redis_watch/clock_skew.hpp"
#include "redis_watch/redis_info.hpp"
#include "telemetry/prometheus_text.hpp"

namespace floodgate::service {
namespace {

struct node_state {
  std::string label;  // host:port
  bool up = false;    // the last sample answered
  std::optional<redis_info> info;
  std::optional<clock_sample> clock;  // the latest TIME sample
};

std::int64_t to_int(std::string_view s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

}  // namespace

struct redis_sampler::impl {
  redis_sampler_options options;
  bool enabled = false;             // the URL names nodes to sample
  floodgate::redis_options client;  // the URL's options (TLS files, sentinels' credentials)
  std::unique_ptr<redis::node_asker> asker;  // the sampler thread's (stop() from any)
  // Sentinel: who to ask for the primary, and the primary's credentials (its host and port
  // found). Empty otherwise.
  std::optional<redis::sentinel_config> sentinel;
  std::vector<redis::redis_endpoint> links;  // the nodes sampled; the sampler thread's
  std::vector<bool> clock_alarm;             // the sampler thread's: skew logged as over
  mutable std::mutex mutex;
  std::vector<node_state> nodes;  // under mutex
  std::jthread thread;            // last: joined before the rest goes

  // `args` to node `ep`, answered within options.timeout (connecting included; stop() ends
  // the wait). nullopt on no reply or an error reply.
  std::optional<redis::reply> ask(const redis::redis_endpoint& ep,
                                  redis::node_asker::command args) {
    std::string why;
    auto replies = asker->ask(ep, redis::node_asker::peer::node, {args}, options.timeout, why);
    if (replies.empty() || replies.front().is_error()) {
      spdlog::debug("msg=\"redis sample failed\" node={} command={} error={}",
                    quote(redis::endpoint_label(ep)), args.front(),
                    quote(replies.empty() ? why : replies.front().str));
      return std::nullopt;
    }
    return std::move(replies.front());
  }

  // Points node 0 at the primary the sentinels name, when it is another than sampled so far:
  // the old node's figures go (its series end), the new one's start at the next sample.
  void follow_primary() {
    std::string why;
    auto primary = redis::primary_from_sentinels(*asker, *sentinel, options.timeout, why);
    if (!primary) spdlog::debug("msg=\"redis sample: no primary\" error={}", quote(why));
    if (!primary || (!links.empty() && links[0] == *primary)) return;
    if (!links.empty()) asker->close(links[0], redis::node_asker::peer::node);
    links.assign(1, *primary);
    clock_alarm.assign(1, false);
    std::lock_guard lock(mutex);
    nodes.assign(1, {redis::endpoint_label(*primary), false, {}, {}});
  }

  // INFO from node i; nullopt when it did not answer.
  std::optional<redis_info> sample(std::size_t i) {
    auto r = ask(links[i], {"INFO", "all"});
    if (!r || r->kind != redis::reply::type::string) return std::nullopt;
    return parse_info(r->str);
  }

  // Redis's clock against ours (TIME: seconds and microseconds as strings).
  std::optional<clock_sample> sample_clock(std::size_t i) {
    const auto sent = std::chrono::system_clock::now();
    auto r = ask(links[i], {"TIME"});
    const auto received = std::chrono::system_clock::now();
    if (!r || r->kind != redis::reply::type::array || r->elements.size() != 2) return std::nullopt;
    const auto us = std::chrono::seconds(to_int(r->elements[0].str)) +
                    std::chrono::microseconds(to_int(r->elements[1].str));
    return clock_offset(sent, us, received);
  }
  // One line when a node's skew crosses the threshold, one when it is back under.
  void note_clock(std::size_t i, const clock_sample& c) {
    const bool now = skewed(c, options.max_clock_skew);
    if (now == clock_alarm[i]) return;
    clock_alarm[i] = now;
    const auto ms = [](std::chrono::microseconds d) {
      return static_cast<double>(d.count()) / 1e3;
    };
    if (now)
      spdlog::warn(
          "msg=\"clock skew with Redis over the threshold; decisions use Redis's clock, but "
          "retry_after and reset_after are off by this much for clients on this host's clock\" "
          "node={} offset_ms={:.1f} rtt_ms={:.1f} threshold_ms={}",
          quote(nodes[i].label), ms(c.offset), ms(c.rtt), options.max_clock_skew.count() / 1000);
    else
      spdlog::info(
          "msg=\"clock skew with Redis back under the threshold\" node={} offset_ms={:.1f}",
          quote(nodes[i].label), ms(c.offset));
  }

  void run(std::stop_token stop) {
    // Ends an ask in progress at once.
    std::stop_callback end_ask(stop, [this] { asker->stop(); });
    std::mutex m;
    std::condition_variable_any wake;
    while (!stop.stop_requested()) {
      if (sentinel) follow_primary();
      for (std::size_t i = 0; i < links.size() && !stop.stop_requested(); ++i) {
        auto info = sample(i);
        const auto clock = info ? sample_clock(i) : std::nullopt;
        std::lock_guard lock(mutex);
        nodes[i].up = info.has_value();
        if (info) nodes[i].info = std::move(info);
        if (clock) {
          nodes[i].clock = clock;
          note_clock(i, *clock);
        }
      }
      std::unique_lock lock(m);
      wake.wait_for(lock, stop, options.interval, [] { return false; });
    }
  }
};

redis_sampler::redis_sampler(redis_sampler_options options) : impl_(std::make_unique<impl>()) {
  auto& s = *impl_;
  s.options = std::move(options);
  std::vector<redis::redis_endpoint> endpoints;
  try {
    // The backend's own reading of the URL: its options (TLS files, the sentinels'
    // credentials) and its nodes.
    const auto base = redis::apply_url_options(s.options.url, s.client);
    if (redis::is_cluster_url(base))
      endpoints = redis::parse_cluster_url(base);
    else if (redis::is_sentinel_url(base))
      s.sentinel = redis::parse_sentinel_url(base);
    else if (redis::iequals_prefix(base, "redis://") || redis::iequals_prefix(base, "rediss://"))
      endpoints.push_back(redis::parse_redis_url(base));
  } catch (const std::exception&) {
    // The backend refused the same URL already; nothing to sample.
    return;
  }
  if (endpoints.empty() && !s.sentinel) return;
  const bool tls = s.sentinel ? s.sentinel->primary.tls : endpoints.front().tls;
  s.asker = std::make_unique<redis::node_asker>(
      s.client, tls ? redis::make_tls_context(s.client.tls) : redis::tls_context_result{});
  for (const auto& ep : endpoints) {
    s.links.push_back(ep);
    s.nodes.push_back({redis::endpoint_label(ep), false, {}, {}});
  }
  s.clock_alarm.resize(s.links.size());
  s.enabled = true;
  s.thread = std::jthread([&s](std::stop_token stop) { s.run(stop); });
}

redis_sampler::~redis_sampler() = default;  // the jthread stops and joins first

bool redis_sampler::enabled() const noexcept {
  return impl_->enabled;
}

std::vector<node_clock> redis_sampler::clocks() const {
  std::vector<node_clock> out;
  std::lock_guard lock(impl_->mutex);
  for (const auto& n : impl_->nodes) out.push_back({n.label, n.up, n.clock});
  return out;
}

void redis_sampler::render(std::string& out) const {
  if (!enabled()) return;
  std::lock_guard lock(impl_->mutex);
  const auto& nodes = impl_->nodes;
  // A family with a series (or several) per node: `value` writes a node's samples.
  auto family = [&](std::string_view name, metric_type type, std::string_view help, auto&& value) {
    prometheus_family f(out, name, type, help);
    for (const auto& n : nodes) value(f, n);
  };
  // The rest only for nodes sampled at least once: a counter that never was is absent, not 0.
  auto sampled = [](auto fn) {
    return [fn](prometheus_family& f, const node_state& n) {
      if (n.info) fn(f, n.label, *n.info);
    };
  };
  // One INFO number, one series per node.
  auto field = [&sampled](std::uint64_t redis_info::*number) {
    return sampled([number](prometheus_family& f, std::string_view node, const redis_info& i) {
      f.sample({{"node", node}}, i.*number);
    });
  };
  using enum metric_type;
  family("floodgate_redis_up", gauge, "1 when the last INFO sample of the node answered.",
         [](prometheus_family& f, const node_state& n) {
           f.sample({{"node", n.label}}, n.up ? 1 : 0);
         });
  family("floodgate_redis_clock_offset_seconds", gauge,
         "Redis's clock minus this host's (TIME, round trip halved; exact within ± rtt/2). "
         "Decisions use Redis's clock; skew makes retry_after hints wrong for clients.",
         [](prometheus_family& f, const node_state& n) {
           if (n.clock)
             f.sample({{"node", n.label}}, static_cast<double>(n.clock->offset.count()) / 1e6);
         });
  family("floodgate_redis_clock_rtt_seconds", gauge,
         "Round trip of the TIME call behind the offset (its uncertainty is half this).",
         [](prometheus_family& f, const node_state& n) {
           if (n.clock)
             f.sample({{"node", n.label}}, static_cast<double>(n.clock->rtt.count()) / 1e6);
         });
  family("floodgate_redis_cpu_seconds_total", counter,
         "CPU time the Redis server used (INFO used_cpu_sys, used_cpu_user), by mode.",
         sampled([](prometheus_family& f, std::string_view node, const redis_info& i) {
           f.sample({{"node", node}, {"mode", "system"}}, i.used_cpu_sys);
           f.sample({{"node", node}, {"mode", "user"}}, i.used_cpu_user);
         }));
  family("floodgate_redis_memory_used_bytes", gauge, "Memory Redis uses (INFO used_memory).",
         field(&redis_info::used_memory));
  family("floodgate_redis_memory_max_bytes", gauge,
         "Redis's maxmemory (0: no limit; keys are then never evicted for memory).",
         field(&redis_info::maxmemory));
  family("floodgate_redis_evicted_keys_total", counter,
         "Keys Redis evicted at maxmemory (a rate-limit key evicted starts again at full "
         "capacity).",
         field(&redis_info::evicted_keys));
  family("floodgate_redis_expired_keys_total", counter, "Keys Redis expired (their TTL ran out).",
         field(&redis_info::expired_keys));
  family("floodgate_redis_script_calls_total", counter,
         "Calls of the commands floodgate's scripts run as (evalsha, script|load, ...), every "
         "client's (INFO commandstats).",
         sampled([](prometheus_family& f, std::string_view node, const redis_info& i) {
           for (const auto& c : i.commands)
             f.sample({{"node", node}, {"command", c.name}}, c.calls);
         }));
  family("floodgate_redis_script_cpu_seconds_total", counter,
         "CPU time Redis spent in those commands (INFO commandstats usec).",
         sampled([](prometheus_family& f, std::string_view node, const redis_info& i) {
           for (const auto& c : i.commands)
             f.sample({{"node", node}, {"command", c.name}}, static_cast<double>(c.usec) / 1e6);
         }));
}

}  // namespace floodgate::service
