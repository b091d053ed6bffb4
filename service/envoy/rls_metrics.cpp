#include "rls_metrics.hpp"

#include <cstdio>
#include <limits>

namespace floodgate::service::envoy {
namespace {

// Prometheus label values escape backslash, double quote and newline.
std::string label(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// A client's hits_addend is a uint64: a wrapped sum would read as a counter reset.
void add_saturating(std::uint64_t& counter, std::uint64_t hits) {
  counter = hits > std::numeric_limits<std::uint64_t>::max() - counter
                ? std::numeric_limits<std::uint64_t>::max()
                : counter + hits;
}

}  // namespace

void rls_metrics::record(std::string_view domain, std::string_view rule, std::uint64_t hits,
                         verdict v, bool shadow) {
  std::lock_guard lock(mutex_);
  auto it = series_.find({std::string(domain), std::string(rule)});
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

void rls_metrics::append(std::string& out) const {
  std::lock_guard lock(mutex_);
  struct family {
    const char* name;
    const char* help;
    std::uint64_t counters::*field;
  };
  constexpr family families[] = {
      {"floodgate_envoy_total_hits", "Hits asked of each rule (the sum of hits_addend).",
       &counters::total_hits},
      {"floodgate_envoy_over_limit", "Hits over the rule's limit (refused, or shadow mode).",
       &counters::over_limit},
      {"floodgate_envoy_near_limit", "Admitted hits beyond 80% of the rule's limit.",
       &counters::near_limit},
      {"floodgate_envoy_within_limit", "Admitted hits.", &counters::within_limit},
      {"floodgate_envoy_shadow_mode", "Hits over a shadow-mode rule's limit (admitted).",
       &counters::shadow_mode},
  };
  for (const auto& f : families) {
    out += std::string("# HELP ") + f.name + "_total " + f.help + "\n# TYPE " + f.name +
           "_total counter\n";
    for (const auto& [key, c] : series_)
      out += std::string(f.name) + "_total{domain=\"" + label(key.first) + "\",rule=\"" +
             label(key.second) + "\"} " + std::to_string(c.*(f.field)) + "\n";
  }
  out +=
      "# HELP floodgate_envoy_requests_total ShouldRateLimit calls answered, by gRPC status.\n"
      "# TYPE floodgate_envoy_requests_total counter\n";
  constexpr const char* codes[] = {"OK", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "OTHER"};
  for (std::size_t i = 0; i < requests_.size(); ++i)
    out += std::string("floodgate_envoy_requests_total{code=\"") + codes[i] + "\"} " +
           std::to_string(requests_[i]) + "\n";
  out +=
      "# HELP floodgate_envoy_request_duration_seconds ShouldRateLimit latency in floodgated.\n"
      "# TYPE floodgate_envoy_request_duration_seconds histogram\n";
  std::uint64_t cumulative = 0;
  char le[32];
  for (std::size_t i = 0; i < bounds_seconds.size(); ++i) {
    cumulative += buckets_[i];
    std::snprintf(le, sizeof le, "%g", bounds_seconds[i]);
    out += std::string("floodgate_envoy_request_duration_seconds_bucket{le=\"") + le + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  cumulative += buckets_.back();
  out += "floodgate_envoy_request_duration_seconds_bucket{le=\"+Inf\"} " +
         std::to_string(cumulative) + "\n";
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9f", latency_sum_);
  out += std::string("floodgate_envoy_request_duration_seconds_sum ") + sum + "\n";
  out += "floodgate_envoy_request_duration_seconds_count " + std::to_string(cumulative) + "\n";
}

}  // namespace floodgate::service::envoy
