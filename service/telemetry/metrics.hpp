// The service's counters, rendered as Prometheus text for GET /metrics.
//
//   metrics m;
//   m.record_rule("api", verdict::allowed, cost, &decision, /*shadow_denied=*/false);
//   m.record_backend_call(latency, error);
//   m.record_algorithm_latency(algorithm::gcra, latency);
//   std::string text = m.render();
//
// Labels are bounded: rule names (from the config, never forgotten across reloads so counters
// never go backwards), algorithms, verdicts, status codes. Never a caller's key.
//
// Threading: every member may be called from any thread at once; counting is lock-free
// except the first decision of a rule never seen before.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "floodgate/decision.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::service {

// What a check ended as, for counting.
enum class verdict {
  allowed,        // admitted
  denied,         // over the limit
  degraded,       // backend failed, admitted (fail-open)
  failed,         // backend failed, refused (fail-closed): a 503
  invalid,        // the request was wrong: a 400
  local_allowed,  // backend failed, admitted in local mode (limit ÷ N)
  local_denied,   // backend failed, refused in local mode: a 429
};
constexpr std::size_t verdict_count = 7;
std::string_view to_string(verdict v) noexcept;

// The verdict of a check_all (every item of it shares the combined verdict).
verdict verdict_of(const multi_check_result& r) noexcept;

// Concurrency limits' calls (/v1/acquire, /v1/release, /v1/renew) and how they ended.
enum class lease_operation { acquire, release, renew };
enum class lease_outcome {
  granted,   // acquire: a lease
  refused,   // acquire: every slot held (a 429)
  degraded,  // acquire: backend failed, admitted without a lease (fail-open)
  released,  // release: the lease was live and its slot is free
  renewed,   // renew: the lease was live and runs a full lease from now
  not_held,  // release, renew: not live (released already, expired, or another key's)
  failed,    // backend failed: a 503
  invalid,   // the limiter refused the request (a 400)
};
constexpr std::size_t lease_outcome_count = 8;

// A refund (/v1/refund) and how it ended.
enum class refund_result {
  refunded,           // gave back some of its cost (never beyond the limit)
  failed,             // Redis refused it (BUSY, OOM, an error): nothing given back, a 503
  invalid,            // the limiter refused the request (a 400)
  unknown,            // no answer (timeout, connection lost): maybe given back, a 503
  nothing_to_refund,  // made, but the key held none of its cost (never consumed, or back)
  replayed,           // its Idempotency-Key was used already: nothing given back again
};

// Which connection cap a new connection met, and what was done about it.
enum class connection_cap { per_peer, global };
enum class cap_action {
  closed_idle,  // the longest-idle keep-alive connection (of the peer, or of all) was closed
  refused,      // nothing was idle: the new connection got the canned 503
};

class metrics {
 public:
  // Latency buckets of floodgate_backend_latency_seconds (upper bounds, seconds).
  static constexpr std::array<double, 13> latency_buckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};

  // One rule's part in a decided check: the check's verdict `v`, the cost the item asked, and
  // the item's decision when the backend (or local mode) made one (null otherwise). Counts the
  // verdict, the cost charged (allowed and local_allowed), admissions that left less than 10 %
  // of the capacity (near limit), shadow rules' would-be denials, and checks a per-key
  // override decided (`overridden`: under the rule's name, with the key's own policy).
  void record_rule(std::string_view rule, verdict v, std::int64_t cost, const decision* d,
                   bool shadow_denied, bool overridden = false);
  // The latency of a backend call whose items all use `algo` (nullopt: several algorithms).
  void record_algorithm_latency(std::optional<algorithm> algo,
                                std::chrono::nanoseconds latency) noexcept;
  // One call to the backend: its latency, and its error if it failed.
  void record_backend_call(std::chrono::nanoseconds latency, std::error_code error);
  // A concurrency limit's call (lease_outcome says which outcomes each operation has).
  void record_lease(std::string_view rule, lease_operation op, lease_outcome o);
  // A refund that gave back `given` (counted when refunded).
  void record_refund(std::string_view rule, refund_result r, std::int64_t given);
  void record_response(int status) noexcept;
  void record_reload(bool ok) noexcept;
  void record_connection_cap(connection_cap cap, cap_action action) noexcept;
  void connection_opened() noexcept { open_connections_.fetch_add(1, std::memory_order_relaxed); }
  void connection_closed() noexcept { open_connections_.fetch_sub(1, std::memory_order_relaxed); }
  std::int64_t open_connections() const noexcept { return open_connections_.load(); }

  // More families to append to the text, e.g. a backend's script reloads. A collector writes
  // complete "# HELP / # TYPE / samples" blocks (prometheus_text.hpp) and must be thread-safe.
  using collector = std::function<void(std::string& out)>;
  void add_collector(collector c);

  std::string render() const;

  // The counters behind the text, for GET /v1/status (status.hpp).
  struct rule_snapshot {
    std::array<std::uint64_t, verdict_count> verdicts{};  // by verdict
    std::uint64_t cost = 0, near_limit = 0, shadow_denied = 0, overridden = 0;
  };
  struct latency_snapshot {
    std::array<std::uint64_t, latency_buckets.size() + 1> counts{};  // per bucket, +Inf last
    double sum_seconds = 0;
  };
  std::optional<rule_snapshot> rule_counts(std::string_view rule) const;  // nullopt: none yet
  latency_snapshot backend_latency() const;
  std::vector<std::pair<std::string_view, std::uint64_t>> backend_errors() const;  // by kind

 private:
  using counter = std::atomic<std::uint64_t>;
  struct histogram {
    std::array<counter, latency_buckets.size() + 1> counts{};  // per bucket, +Inf last
    counter sum_ns{0};
    void observe(std::chrono::nanoseconds latency) noexcept;
    latency_snapshot snapshot() const noexcept;
  };
  struct rule_counters {
    std::array<counter, verdict_count> verdicts{};
    counter cost{0};           // cost charged by admitted checks
    counter near_limit{0};     // admitted, leaving remaining < 10 % of the capacity
    counter shadow_denied{0};  // a shadow rule's denials, answered as allowed
    counter overridden{0};     // checks a per-key override decided
  };
  // Algorithms, then "mixed" (a check_all over rules of several algorithms).
  static constexpr std::size_t algorithm_labels = 6;
  // Backend error kinds: floodgate::errc's backend codes, then "other".
  static constexpr std::size_t error_kinds = 8;
  // Response status codes worth a series of their own, then "other".
  static constexpr std::array<int, 14> statuses = {200, 204, 400, 403, 404, 405, 408,
                                                   413, 429, 431, 500, 501, 503, 0};

  // Concurrency limits' and refunds' counters of one rule, apart from its decisions: a rule
  // shows the families it has used.
  struct lease_counters {
    std::array<counter, 3 * lease_outcome_count> calls{};  // [operation * count + outcome]
  };
  struct refund_counters {
    std::array<counter, 6> results{};  // by refund_result
    counter cost{0};                   // cost given back by refunds
  };

  mutable std::shared_mutex decisions_mutex_;
  std::map<std::string, rule_counters, std::less<>> decisions_;
  std::map<std::string, lease_counters, std::less<>> leases_;
  std::map<std::string, refund_counters, std::less<>> refunds_;
  rule_counters& counters_of(std::string_view rule);

  std::array<counter, error_kinds> backend_errors_{};
  histogram latency_;
  std::array<histogram, algorithm_labels> algorithm_latency_;
  std::array<counter, statuses.size()> responses_{};
  counter reloads_ok_{0};
  counter reloads_failed_{0};
  std::array<counter, 4> connection_caps_{};  // [cap * 2 + action]
  std::atomic<std::int64_t> open_connections_{0};

  mutable std::mutex collectors_mutex_;
  std::vector<collector> collectors_;
};

}  // namespace floodgate::service
