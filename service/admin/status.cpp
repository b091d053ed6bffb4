#include "admin/status.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "telemetry/hot_keys.hpp"

namespace floodgate::service {
namespace {

namespace json = boost::json;

double ms(std::chrono::microseconds d) {
  return static_cast<double>(d.count()) / 1000.0;
}

json::object rule_json(const rule& r, const metrics& stats) {
  json::object o;
  o["name"] = r.name();
  if (r.concurrency) {
    o["algorithm"] = "concurrency";
    o["limit"] = r.concurrency->limit();
    o["window_ms"] = r.concurrency->lease().count();  // a lease's life
  } else {
    o["algorithm"] = std::string(to_string(r.policy.algo()));
    o["limit"] = r.policy.limit();
    o["window_ms"] = r.policy.window().count();
  }
  o["shadow"] = r.shadow;
  const auto c = stats.rule_counts(r.name()).value_or(metrics::rule_snapshot{});
  json::object decisions;
  for (std::size_t v = 0; v < verdict_count; ++v)
    decisions[to_string(static_cast<verdict>(v))] = c.verdicts[v];
  o["decisions"] = std::move(decisions);
  o["cost"] = c.cost;
  o["near_limit"] = c.near_limit;
  o["shadow_denied"] = c.shadow_denied;
  return o;
}

json::object backend_json(const admin_sources& sources) {
  const auto b = sources.backend ? sources.backend() : backend_state{};
  json::object o;
  o["kind"] = b.kind;
  o["healthy"] = b.healthy;
  o["last_error"] = b.last_error;
  const auto h = sources.stats->backend_latency();
  std::uint64_t calls = 0;
  for (const auto n : h.counts) calls += n;
  o["calls"] = calls;
  json::object errors;
  for (const auto& [kind, n] : sources.stats->backend_errors()) errors[kind] = n;
  o["errors"] = std::move(errors);
  if (calls == 0) {
    o["latency_mean_ms"] = nullptr;
    o["latency_p99_ms"] = nullptr;
  } else {
    o["latency_mean_ms"] = h.sum_seconds / static_cast<double>(calls) * 1000.0;
    o["latency_p99_ms"] = histogram_quantile(h, 0.99) * 1000.0;
  }
  return o;
}

// Where the rules come from: a stuck instance shows an older version than its peers, or a
// refused newer one, or a Redis it cannot read.
json::object rules_source_json(const admin_sources& sources) {
  json::object o;
  const auto s = sources.rules_source ? sources.rules_source() : rules_state{};
  o["from"] = s.from_redis ? "redis" : "file";
  o["where"] = s.where;
  if (!s.from_redis) {
    o["version"] = nullptr;
    return o;
  }
  o["version"] = s.version;
  o["latest"] = s.latest;
  o["refused"] = s.refused;
  o["redis_error"] = s.redis_error;
  o["subscribed"] = s.subscribed;
  o["applied_at_ms"] = s.applied_at_ms;
  o["checked_at_ms"] = s.checked_at_ms;
  o["apply_failures"] = s.apply_failures;
  o["runtime_overrides"] = s.runtime_overrides;
  o["overrides_version"] = s.overrides_version;
  return o;
}

}  // namespace

double histogram_quantile(const metrics::latency_snapshot& h, double q) {
  std::uint64_t total = 0;
  for (const auto n : h.counts) total += n;
  if (total == 0) return -1;
  const auto& bounds = metrics::latency_buckets;
  const double rank = q * static_cast<double>(total);
  double below = 0;  // observations in the buckets before b
  for (std::size_t b = 0; b < h.counts.size(); ++b) {
    const auto n = static_cast<double>(h.counts[b]);
    if (n > 0 && below + n >= rank) {
      if (b == bounds.size()) return bounds.back();  // +Inf: all we know is "above the last"
      const double lower = b == 0 ? 0.0 : bounds[b - 1];
      return lower + (bounds[b] - lower) * (rank - below) / n;
    }
    below += n;
  }
  return bounds.back();
}

http_response render_status(const admin_sources& sources) {
  using namespace std::chrono;
  json::object o;
  o["now_ms"] = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  o["uptime_s"] = duration<double>(steady_clock::now() - sources.started).count();
  json::array rules;
  if (sources.store) {
    const auto cfg = sources.store->get();
    for (const auto& r : cfg->rules()) rules.push_back(rule_json(r, *sources.stats));
  }
  o["rules"] = std::move(rules);
  o["rules_source"] = rules_source_json(sources);
  o["backend"] = backend_json(sources);
  json::array clock;
  if (sources.clocks)
    for (const auto& n : sources.clocks()) {
      json::object c;
      c["node"] = n.node;
      c["up"] = n.up;
      if (n.clock) {
        c["offset_ms"] = ms(n.clock->offset);
        c["rtt_ms"] = ms(n.clock->rtt);
      } else {
        c["offset_ms"] = nullptr;
        c["rtt_ms"] = nullptr;
      }
      clock.push_back(std::move(c));
    }
  o["clock"] = std::move(clock);
  json::object top;
  top["enabled"] = sources.top != nullptr;
  if (sources.top) {
    top["capacity"] = sources.top->options().capacity;
    top["interval_ms"] = sources.top->options().interval.count();
  }
  o["top_keys"] = std::move(top);
  return admin_json(json::serialize(o));
}

}  // namespace floodgate::service
