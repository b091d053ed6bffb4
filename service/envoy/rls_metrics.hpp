// The rate limit service's metrics, in Prometheus text: per domain and rule, upstream's
// counters (total_hits, over_limit, near_limit, within_limit, shadow_mode), the gRPC
// request latency and the connections its caps refused. Bounded: at most max_series (domain, rule)
// pairs; later ones are counted under rule="_other". Series named by a request's values
// (detailed_metric, value_to_metric: a client chooses them) are bounded apart, so they cannot
// crowd out the rules' own: at most max_request_named_series, each name at most
// max_request_named_bytes; past either, the hits count under the rule's own name.
//
//   rls_metrics m;
//   m.record("edge", "remote_address", 1, verdict::within_limit);
//   m.append(out);   // a metrics collector (metrics::add_collector)
//
// Threading: every member from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "connection_table.hpp"

namespace floodgate::service::envoy {

enum class verdict {
  within_limit,  // admitted, below upstream's near-limit ratio (80% of the limit used)
  near_limit,    // admitted, beyond it
  over_limit,    // refused (or, in shadow mode, would have been)
};

// A ShouldRateLimit call's end. cancelled: its client gave up (cancelled, or its deadline
// passed) before floodgated answered, whatever the answer was.
enum class grpc_code_class {
  ok,
  invalid_argument,
  deadline_exceeded,
  unavailable,
  cancelled,
  other
};

class rls_metrics {
 public:
  static constexpr std::size_t max_series = 10000;
  static constexpr std::size_t max_request_named_series = 1000;
  static constexpr std::size_t max_request_named_bytes = 256;

  // `by_request`: the name a request's values give the rule (empty: none), used while there is
  // room for it.
  void record(std::string_view domain, std::string_view rule, std::uint64_t hits, verdict v,
              bool shadow, std::string_view by_request = {});
  void observe_request(std::chrono::nanoseconds latency, grpc_code_class c);
  // A new gRPC connection closed at once: over the global cap, or its address's.
  void record_connection_refused(connection_table::verdict cap);
  // A call ended before its message arrived: refused at its headers (its address had too many
  // waiting), evicted to make room for a new one (too many in all), or late.
  enum class stream_end { per_peer, evicted, timeout };
  void record_stream_ended(stream_end why);
  // A gRPC connection closed for not taking its answers within the write timeout: its socket
  // did not take a write, or its HTTP/2 flow-control window held an answer back.
  enum class write_stall { socket, flow_control };
  void record_write_timeout(write_stall why);
  void append(std::string& out) const;

 private:
  struct counters {
    std::uint64_t total_hits = 0, over_limit = 0, near_limit = 0, within_limit = 0, shadow_mode = 0;
  };
  static constexpr std::array<double, 12> bounds_seconds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};

  mutable std::mutex mutex_;
  // (domain, rule), looked up by views: a call's names are not copied to find their series.
  using name_pair = std::pair<std::string_view, std::string_view>;
  struct by_names {
    using is_transparent = void;
    static name_pair view(const std::pair<std::string, std::string>& p) noexcept {
      return {p.first, p.second};
    }
    static name_pair view(const name_pair& p) noexcept { return p; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const noexcept {
      return view(a) < view(b);
    }
  };
  std::map<std::pair<std::string, std::string>, counters, by_names> series_;
  std::size_t request_named_ = 0;
  std::array<std::uint64_t, bounds_seconds.size() + 1> buckets_{};
  double latency_sum_ = 0;
  std::array<std::uint64_t, 6> requests_{};
  std::uint64_t refused_global_ = 0, refused_per_peer_ = 0;
  std::array<std::uint64_t, 3> streams_ended_{};  // by stream_end
  std::array<std::uint64_t, 2> write_timeouts_{};  // by write_stall
};

}  // namespace floodgate::service::envoy
