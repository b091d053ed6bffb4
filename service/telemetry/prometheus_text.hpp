// Prometheus text (exposition format 0.0.4), written one way for every family floodgated
// serves on /metrics: the service's counters (metrics.hpp), the backend's and the limiter's
// stats (limiter_metrics.hpp), Redis's own (redis_sampler.hpp) and Envoy's
// (envoy/rls_metrics.hpp).
//
//   prometheus_family f(out, "floodgate_decisions_total", metric_type::counter, "Checks ...");
//   f.sample({{"rule", "api"}, {"result", "allowed"}}, 12);   // ..._total{rule="api",...} 12
//   prometheus_family(out, "floodgate_backend_ready", metric_type::gauge, "1 while ...").sample(1);
//   h.histogram({{"algorithm", "gcra"}}, bounds, counts, sum_seconds);
//
// The family's # HELP and # TYPE lines are written when it is made, its samples after them, so
// a family's lines are always together. Label values are escaped (\\, \" and \n) and so is help
// text (\\ and \n); integers are written exactly, other numbers with 9 significant digits
// (%.9g; +Inf, -Inf, NaN as Prometheus spells them).
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace floodgate::service {

enum class metric_type { counter, gauge, histogram };

struct metric_label {
  std::string_view name;   // a label name: [a-zA-Z_][a-zA-Z0-9_]*, not checked
  std::string_view value;  // any text: escaped when written
};
using metric_labels = std::initializer_list<metric_label>;

class prometheus_family {
 public:
  // Appends the # HELP and # TYPE lines of family `name` to `out`, which must outlive this.
  prometheus_family(std::string& out, std::string_view name, metric_type type,
                    std::string_view help);

  // One sample: `name{labels} value`, or `name value` without labels.
  template <std::integral T>
  void sample(metric_labels labels, T value) {
    start(labels);
    out_ += std::to_string(value);
    out_ += '\n';
  }
  void sample(metric_labels labels, double value);
  template <class T>
  void sample(T value) {
    sample({}, value);
  }

  // A histogram's series for `labels`: a _bucket line per upper bound in `bounds` (cumulative
  // counts, le="..." after the labels) and +Inf, then _sum and _count. `counts` holds each
  // bucket's own count, +Inf's last (bounds.size() + 1 of them).
  void histogram(metric_labels labels, std::span<const double> bounds,
                 std::span<const std::uint64_t> counts, double sum);

 private:
  // Writes `name_suffix{labels} ` (or `name_suffix `), ready for the value.
  void start(metric_labels labels, std::string_view suffix = {});

  std::string& out_;
  std::string name_;
};

// A number as Prometheus reads it: %.9g, and +Inf, -Inf, NaN.
void append_prometheus_number(std::string& out, double v);

}  // namespace floodgate::service
