#include "redis_watch/redis_sampler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "floodgate/inspect.hpp"
#include "logging/log_format.hpp"
#include "redis_watch/clock_skew.hpp"
#include "redis_watch/redis_info.hpp"
#include "telemetry/prometheus_text.hpp"

namespace floodgate::service {
namespace {

// Written by the sampler thread only (under mutex), which reads it without.
struct node_state : node_clock {
  std::optional<redis_info> info;
  bool clock_alarm = false;  // skew logged as over
};

void log_failure(const std::string& node, std::string_view command, const std::string& error) {
  spdlog::debug("msg=\"redis sample failed\" node={} command={} error={}", quote(node), command,
                quote(error));
}

}  // namespace

struct redis_sampler::impl {
  redis_sampler_options options;
  // The library's questions to the URL's nodes, TLS and credentials as the backend's; the
  // sampler thread's (stop() from any).
  std::unique_ptr<redis_inspector> inspector;
  mutable std::mutex mutex;
  std::vector<node_state> nodes;  // the nodes sampled
  std::jthread thread;            // last: joined before the rest goes; none: nothing to sample

  // The nodes the URL names now (Sentinel: the primary the sentinels name, asked each time).
  // When they change, the old nodes' figures go (their series end), the new ones' start at the
  // next sample.
  void follow_nodes() {
    auto now = inspector->nodes();
    if (!now.error.empty())
      spdlog::debug("msg=\"redis sample: no primary\" error={}", quote(now.error));
    if (std::ranges::equal(now.nodes, nodes, {}, {}, &node_state::node)) return;
    std::lock_guard lock(mutex);
    nodes.clear();
    for (auto& n : now.nodes) nodes.emplace_back().node = std::move(n);
  }

  std::optional<redis_info> sample(std::size_t i) {
    auto r = inspector->info(nodes[i].node);
    if (!r.error.empty()) {
      log_failure(nodes[i].node, "INFO", r.error);
      return std::nullopt;
    }
    return parse_info(r.text);
  }

  std::optional<clock_sample> sample_clock(std::size_t i) {
    const auto sent = std::chrono::system_clock::now();
    auto r = inspector->time(nodes[i].node);
    const auto received = std::chrono::system_clock::now();
    if (!r.error.empty()) {
      log_failure(nodes[i].node, "TIME", r.error);
      return std::nullopt;
    }
    return clock_offset(sent, r.since_epoch, received);
  }
  // One line when a node's skew crosses the threshold, one when it is back under.
  void note_clock(std::size_t i, const clock_sample& c) {
    const bool now = skewed(c, options.max_clock_skew);
    if (now == nodes[i].clock_alarm) return;
    nodes[i].clock_alarm = now;
    const auto ms = [](std::chrono::microseconds d) {
      return static_cast<double>(d.count()) / 1e3;
    };
    if (now)
      spdlog::warn(
          "msg=\"clock skew with Redis over the threshold; decisions use Redis's clock, but "
          "retry_after and reset_after are off by this much for clients on this host's clock\" "
          "node={} offset_ms={:.1f} rtt_ms={:.1f} threshold_ms={}",
          quote(nodes[i].node), ms(c.offset), ms(c.rtt), options.max_clock_skew.count() / 1000);
    else
      spdlog::info(
          "msg=\"clock skew with Redis back under the threshold\" node={} offset_ms={:.1f}",
          quote(nodes[i].node), ms(c.offset));
  }

  void run(std::stop_token stop) {
    // Ends an ask in progress at once.
    std::stop_callback end_ask(stop, [this] { inspector->stop(); });
    std::mutex m;
    std::condition_variable_any wake;
    while (!stop.stop_requested()) {
      follow_nodes();
      for (std::size_t i = 0; i < nodes.size() && !stop.stop_requested(); ++i) {
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
  s.inspector = std::make_unique<redis_inspector>(s.options.url, s.options.timeout);
  // memory://, or a URL the backend refused already: nothing to sample.
  if (!s.inspector->why_not().empty()) return;
  s.thread = std::jthread([&s](std::stop_token stop) { s.run(stop); });
}

redis_sampler::~redis_sampler() = default;  // the jthread stops and joins first

bool redis_sampler::enabled() const noexcept {
  return impl_->thread.joinable();
}

std::vector<node_clock> redis_sampler::clocks() const {
  std::lock_guard lock(impl_->mutex);
  return {impl_->nodes.begin(), impl_->nodes.end()};
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
      if (n.info) fn(f, n.node, *n.info);
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
           f.sample({{"node", n.node}}, n.up ? 1 : 0);
         });
  family("floodgate_redis_clock_offset_seconds", gauge,
         "Redis's clock minus this host's (TIME, round trip halved; exact within ± rtt/2). "
         "Decisions use Redis's clock; skew makes retry_after hints wrong for clients.",
         [](prometheus_family& f, const node_state& n) {
           if (n.clock)
             f.sample({{"node", n.node}}, static_cast<double>(n.clock->offset.count()) / 1e6);
         });
  family("floodgate_redis_clock_rtt_seconds", gauge,
         "Round trip of the TIME call behind the offset (its uncertainty is half this).",
         [](prometheus_family& f, const node_state& n) {
           if (n.clock)
             f.sample({{"node", n.node}}, static_cast<double>(n.clock->rtt.count()) / 1e6);
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
         "Calls of the commands floodgate's scripts run as (fcall, evalsha, function|load, ...), every "
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
