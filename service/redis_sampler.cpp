#include "redis_sampler.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "clock_skew.hpp"
#include "log_format.hpp"
#include "redis/cluster_url.hpp"
#include "redis/url.hpp"
#include "redis_info.hpp"

namespace floodgate::service {
namespace {

struct node_state {
  std::string label;  // host:port
  bool up = false;    // the last sample answered
  std::optional<redis_info> info;
  std::optional<clock_sample> clock;  // the latest TIME sample
};

struct context_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

timeval to_timeval(std::chrono::milliseconds d) {
  return {static_cast<time_t>(d.count() / 1000), static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

void append_double(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  out += buf;
}

}  // namespace

struct redis_sampler::impl {
  redis_sampler_options options;
  std::vector<redis::redis_endpoint> endpoints;  // the sampler thread's
  std::vector<context_ptr> contexts;             // the sampler thread's
  std::vector<bool> clock_alarm;                 // the sampler thread's: skew logged as over
  mutable std::mutex mutex;
  std::vector<node_state> nodes;  // under mutex
  std::jthread thread;

  // A connection to `ep`, authenticated; null (and logged at debug) when it fails.
  context_ptr connect(const redis::redis_endpoint& ep) const {
    const auto tv = to_timeval(options.timeout);
    context_ptr c(redisConnectWithTimeout(ep.host.c_str(), ep.port, tv));
    if (!c || c->err) return nullptr;
    redisSetTimeout(c.get(), tv);
    if (ep.password) {
      reply_ptr r(static_cast<redisReply*>(
          ep.user.empty()
              ? redisCommand(c.get(), "AUTH %s", ep.password->c_str())
              : redisCommand(c.get(), "AUTH %s %s", ep.user.c_str(), ep.password->c_str())));
      if (!r || r->type == REDIS_REPLY_ERROR) return nullptr;
    }
    return c;
  }

  // INFO from node i; nullopt when it did not answer (the connection is dropped then).
  std::optional<redis_info> sample(std::size_t i) {
    if (!contexts[i]) contexts[i] = connect(endpoints[i]);
    if (!contexts[i]) return std::nullopt;
    reply_ptr r(static_cast<redisReply*>(redisCommand(contexts[i].get(), "INFO all")));
    if (!r || r->type != REDIS_REPLY_STRING) {
      contexts[i].reset();
      return std::nullopt;
    }
    return parse_info(std::string_view(r->str, r->len));
  }

  // Redis's clock against ours (TIME: seconds and microseconds as strings).
  std::optional<clock_sample> sample_clock(std::size_t i) {
    if (!contexts[i]) return std::nullopt;
    const auto sent = std::chrono::system_clock::now();
    reply_ptr r(static_cast<redisReply*>(redisCommand(contexts[i].get(), "TIME")));
    const auto received = std::chrono::system_clock::now();
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
      contexts[i].reset();
      return std::nullopt;
    }
    const auto us = std::chrono::seconds(std::atoll(r->element[0]->str)) +
                    std::chrono::microseconds(std::atoll(r->element[1]->str));
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
    std::mutex m;
    std::condition_variable_any wake;
    while (!stop.stop_requested()) {
      for (std::size_t i = 0; i < endpoints.size() && !stop.stop_requested(); ++i) {
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
  const std::string_view url = s.options.url;
  const auto base = url.substr(0, url.find('?'));
  try {
    if (redis::is_cluster_url(base))
      s.endpoints = redis::parse_cluster_url(base);
    else if (redis::iequals_prefix(base, "redis://"))
      s.endpoints.push_back(redis::parse_redis_url(base));
  } catch (const std::exception&) {
    // The backend refused the same URL already; nothing to sample.
    s.endpoints.clear();
  }
  std::erase_if(s.endpoints, [](const redis::redis_endpoint& ep) { return ep.tls; });
  if (s.endpoints.empty()) return;
  for (const auto& ep : s.endpoints) {
    const bool v6 = ep.host.find(':') != std::string::npos;
    s.nodes.push_back(
        {(v6 ? "[" + ep.host + "]" : ep.host) + ":" + std::to_string(ep.port), false, {}, {}});
  }
  s.contexts.resize(s.endpoints.size());
  s.clock_alarm.resize(s.endpoints.size());
  s.thread = std::jthread([&s](std::stop_token stop) { s.run(stop); });
}

redis_sampler::~redis_sampler() = default;  // the jthread stops and joins first

bool redis_sampler::enabled() const noexcept {
  return !impl_->endpoints.empty();
}

std::vector<redis_sampler::node_clock> redis_sampler::clocks() const {
  std::vector<node_clock> out;
  std::lock_guard lock(impl_->mutex);
  for (const auto& n : impl_->nodes) out.push_back({n.label, n.up, n.clock});
  return out;
}

void redis_sampler::render(std::string& out) const {
  if (!enabled()) return;
  std::lock_guard lock(impl_->mutex);
  const auto& nodes = impl_->nodes;
  auto family = [&](std::string_view name, std::string_view type, std::string_view help,
                    auto&& value) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ");
    out.append(name).append(" ").append(type).append("\n");
    for (const auto& n : nodes) value(n, std::string(name) + "{node=\"" + n.label + "\"");
  };
  auto line = [&out](const std::string& start, std::string_view more, auto v) {
    out.append(start).append(more).append("} ");
    if constexpr (std::is_floating_point_v<decltype(v)>)
      append_double(out, v);
    else
      out.append(std::to_string(v));
    out.append("\n");
  };
  family("floodgate_redis_up", "gauge", "1 when the last INFO sample of the node answered.",
         [&](const node_state& n, const std::string& s) { line(s, "", n.up ? 1 : 0); });
  // The rest only for nodes sampled at least once: a counter that never was is absent, not 0.
  auto sampled = [&](auto fn) {
    return [fn](const node_state& n, const std::string& s) {
      if (n.info) fn(*n.info, s);
    };
  };
  family("floodgate_redis_clock_offset_seconds", "gauge",
         "Redis's clock minus this host's (TIME, round trip halved; exact within ± rtt/2). "
         "Decisions use Redis's clock; skew makes retry_after hints wrong for clients.",
         [&](const node_state& n, const std::string& s) {
           if (n.clock) line(s, "", static_cast<double>(n.clock->offset.count()) / 1e6);
         });
  family("floodgate_redis_clock_rtt_seconds", "gauge",
         "Round trip of the TIME call behind the offset (its uncertainty is half this).",
         [&](const node_state& n, const std::string& s) {
           if (n.clock) line(s, "", static_cast<double>(n.clock->rtt.count()) / 1e6);
         });
  family("floodgate_redis_cpu_seconds_total", "counter",
         "CPU time the Redis server used (INFO used_cpu_sys, used_cpu_user), by mode.",
         sampled([&](const redis_info& i, const std::string& s) {
           line(s, ",mode=\"system\"", i.used_cpu_sys);
           line(s, ",mode=\"user\"", i.used_cpu_user);
         }));
  family("floodgate_redis_memory_used_bytes", "gauge", "Memory Redis uses (INFO used_memory).",
         sampled([&](const redis_info& i, const std::string& s) { line(s, "", i.used_memory); }));
  family("floodgate_redis_memory_max_bytes", "gauge",
         "Redis's maxmemory (0: no limit; keys are then never evicted for memory).",
         sampled([&](const redis_info& i, const std::string& s) { line(s, "", i.maxmemory); }));
  family("floodgate_redis_evicted_keys_total", "counter",
         "Keys Redis evicted at maxmemory (a rate-limit key evicted starts again at full "
         "capacity).",
         sampled([&](const redis_info& i, const std::string& s) { line(s, "", i.evicted_keys); }));
  family("floodgate_redis_expired_keys_total", "counter", "Keys Redis expired (their TTL ran out).",
         sampled([&](const redis_info& i, const std::string& s) { line(s, "", i.expired_keys); }));
  family("floodgate_redis_script_calls_total", "counter",
         "Calls of the commands floodgate's scripts run as (evalsha, script|load, ...), every "
         "client's (INFO commandstats).",
         sampled([&](const redis_info& i, const std::string& s) {
           for (const auto& c : i.commands) line(s, ",command=\"" + c.name + "\"", c.calls);
         }));
  family("floodgate_redis_script_cpu_seconds_total", "counter",
         "CPU time Redis spent in those commands (INFO commandstats usec).",
         sampled([&](const redis_info& i, const std::string& s) {
           for (const auto& c : i.commands)
             line(s, ",command=\"" + c.name + "\"", static_cast<double>(c.usec) / 1e6);
         }));
}

}  // namespace floodgate::service
