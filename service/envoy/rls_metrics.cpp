#include "rls_metrics.hpp"

#include <limits>

#include "telemetry/prometheus_text.hpp"

namespace floodgate::service::envoy {
namespace {

// A client's hits_addend is a uint64: a wrapped sum would read as a counter reset.
void add_saturating(std::uint64_t& counter, std::uint64_t hits) {
  counter = hits > std::numeric_limits<std::uint64_t>::max() - counter
                ? std::numeric_limits<std::uint64_t>::max()
                : counter + hits;
}

}  // namespace

void rls_metrics::record(std::string_view domain, std::string_view rule, std::uint64_t hits,
                         verdict v, bool shadow, std::string_view by_request) {
  std::lock_guard lock(mutex_);
  auto it = series_.end();
  if (!by_request.empty()) {
    it = series_.find(name_pair{domain, by_request});
    if (it == series_.end() && request_named_ < max_request_named_series &&
        by_request.size() <= max_request_named_bytes && series_.size() < max_series) {
      it = series_.try_emplace({std::string(domain), std::string(by_request)}).first;
      ++request_named_;
    }
  }
  if (it == series_.end()) it = series_.find(name_pair{domain, rule});
  if (it == series_.end()) {
    const bool room = series_.size() < max_series;
    it = series_.try_emplace({std::string(domain), room ? std::string(rule) : "_other"}).first;
  }
  auto& c = it->second;
  add_saturating(c.total_hits, hits);
  switch (v) {
    case verdict::within_limit:
      add_saturating(c.within_limit, hits);
      break;
    case verdict::near_limit:
      add_saturating(c.within_limit, hits);
      add_saturating(c.near_limit, hits);
      break;
    case verdict::over_limit:
      add_saturating(c.over_limit, hits);
      if (shadow) add_saturating(c.shadow_mode, hits);
      break;
  }
}

void rls_metrics::observe_request(std::chrono::nanoseconds latency, grpc_code_class c) {
  const double s = std::chrono::duration<double>(latency).count();
  std::lock_guard lock(mutex_);
  std::size_t i = 0;
  while (i < bounds_seconds.size() && s > bounds_seconds[i]) ++i;
  ++buckets_[i];
  latency_sum_ += s;
  ++requests_[static_cast<std::size_t>(c)];
}

void rls_metrics::record_connection_refused(connection_table::verdict cap) {
  std::lock_guard lock(mutex_);
  ++(cap == connection_table::verdict::over_per_peer ? refused_per_peer_ : refused_global_);
}

void rls_metrics::record_stream_ended(stream_end why) {
  std::lock_guard lock(mutex_);
  ++streams_ended_[static_cast<std::size_t>(why)];
}

void rls_metrics::record_write_timeout(write_stall why) {
  std::lock_guard lock(mutex_);
  ++write_timeouts_[static_cast<std::size_t>(why)];
}

void rls_metrics::append(std::string& out) const {
  std::lock_guard lock(mutex_);
  struct family {
    const char* name;
    const char* help;
    std::uint64_t counters::*field;
  };
  constexpr family families[] = {
      {"floodgate_envoy_total_hits_total", "Hits asked of each rule (the sum of hits_addend).",
       &counters::total_hits},
      {"floodgate_envoy_over_limit_total", "Hits over the rule's limit (refused, or shadow mode).",
       &counters::over_limit},
      {"floodgate_envoy_near_limit_total", "Admitted hits beyond 80% of the rule's limit.",
       &counters::near_limit},
      {"floodgate_envoy_within_limit_total", "Admitted hits.", &counters::within_limit},
      {"floodgate_envoy_shadow_mode_total", "Hits over a shadow-mode rule's limit (admitted).",
       &counters::shadow_mode},
  };
  for (const auto& f : families) {
    prometheus_family family(out, f.name, metric_type::counter, f.help);
    for (const auto& [key, c] : series_)
      family.sample({{"domain", key.first}, {"rule", key.second}}, c.*(f.field));
  }
  prometheus_family requests(out, "floodgate_envoy_requests_total", metric_type::counter,
                             "ShouldRateLimit calls answered, by gRPC status; CANCELLED: the "
                             "client gave up before the answer (its hits were still charged).");
  constexpr const char* codes[] = {"OK",          "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                   "UNAVAILABLE", "CANCELLED",        "OTHER"};
  static_assert(std::size(codes) == std::tuple_size_v<decltype(requests_)>);
  for (std::size_t i = 0; i < requests_.size(); ++i)
    requests.sample({{"code", codes[i]}}, requests_[i]);
  prometheus_family(out, "floodgate_envoy_request_duration_seconds", metric_type::histogram,
                    "ShouldRateLimit latency in floodgated.")
      .histogram({}, bounds_seconds, buckets_, latency_sum_);
  prometheus_family refused(out, "floodgate_envoy_connection_cap_total", metric_type::counter,
                            "New gRPC connections closed at once: over the global cap or their "
                            "address's (--grpc-max-connections, --grpc-max-connections-per-peer).");
  refused.sample({{"cap", "global"}}, refused_global_);
  refused.sample({{"cap", "per_peer"}}, refused_per_peer_);
  prometheus_family streams(out, "floodgate_envoy_stream_guard_total", metric_type::counter,
                            "gRPC calls ended before their request message arrived: refused "
                            "at their headers (their address had too many waiting), evicted "
                            "(the oldest waiting, for a new one) or past the message timeout.");
  constexpr const char* reasons[] = {"per_peer", "evicted", "timeout"};
  static_assert(std::size(reasons) == std::tuple_size_v<decltype(streams_ended_)>);
  for (std::size_t i = 0; i < streams_ended_.size(); ++i)
    streams.sample({{"reason", reasons[i]}}, streams_ended_[i]);
  prometheus_family writes(out, "floodgate_envoy_write_timeout_total", metric_type::counter,
                           "gRPC connections closed for not taking their answers within the "
                           "write timeout: the socket took no write (socket), or the client's "
                           "HTTP/2 flow-control window held an answer back (flow_control).");
  constexpr const char* stalls[] = {"socket", "flow_control"};
  static_assert(std::size(stalls) == std::tuple_size_v<decltype(write_timeouts_)>);
  for (std::size_t i = 0; i < write_timeouts_.size(); ++i)
    writes.sample({{"reason", stalls[i]}}, write_timeouts_[i]);
}

}  // namespace floodgate::service::envoy
