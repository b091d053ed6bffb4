// The one Prometheus text writer (service/telemetry/prometheus_text.hpp), on exact bytes.
#include "telemetry/prometheus_text.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>

namespace floodgate::service {
namespace {

TEST(prometheus_text, a_family_starts_with_help_and_type_then_its_samples) {
  std::string out;
  prometheus_family f(out, "floodgate_x_total", metric_type::counter, "Things counted.");
  f.sample({{"rule", "api"}, {"result", "allowed"}}, std::uint64_t{12});
  f.sample({{"rule", "api"}, {"result", "denied"}}, 0);
  EXPECT_EQ(out,
            "# HELP floodgate_x_total Things counted.\n"
            "# TYPE floodgate_x_total counter\n"
            "floodgate_x_total{rule=\"api\",result=\"allowed\"} 12\n"
            "floodgate_x_total{rule=\"api\",result=\"denied\"} 0\n");
}

TEST(prometheus_text, a_sample_without_labels_has_no_braces) {
  std::string out;
  prometheus_family(out, "floodgate_open_connections", metric_type::gauge, "Open.").sample(-3);
  prometheus_family(out, "floodgate_ratio", metric_type::gauge, "A ratio.").sample(0.25);
  EXPECT_EQ(out,
            "# HELP floodgate_open_connections Open.\n"
            "# TYPE floodgate_open_connections gauge\n"
            "floodgate_open_connections -3\n"
            "# HELP floodgate_ratio A ratio.\n"
            "# TYPE floodgate_ratio gauge\n"
            "floodgate_ratio 0.25\n");
}

TEST(prometheus_text, label_values_and_help_are_escaped) {
  std::string out;
  prometheus_family f(out, "m", metric_type::counter, "a \\ b\nc \"d\"");
  f.sample({{"rule", "x\"y\\z\nw"}}, 1);
  EXPECT_EQ(out,
            "# HELP m a \\\\ b\\nc \"d\"\n"
            "# TYPE m counter\n"
            "m{rule=\"x\\\"y\\\\z\\nw\"} 1\n");
}

TEST(prometheus_text, numbers_have_nine_significant_digits_and_prometheus_infinities) {
  std::string out;
  append_prometheus_number(out, 3.00305);
  out += ' ';
  append_prometheus_number(out, 1.0 / 3);
  out += ' ';
  append_prometheus_number(out, std::numeric_limits<double>::infinity());
  out += ' ';
  append_prometheus_number(out, -std::numeric_limits<double>::infinity());
  out += ' ';
  append_prometheus_number(out, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(out, "3.00305 0.333333333 +Inf -Inf NaN");
}

TEST(prometheus_text, a_histogram_has_cumulative_buckets_then_sum_and_count) {
  constexpr std::array<double, 2> bounds = {0.001, 0.5};
  constexpr std::array<std::uint64_t, 3> counts = {2, 0, 1};  // +Inf last
  std::string out;
  prometheus_family f(out, "h_seconds", metric_type::histogram, "Latency.");
  f.histogram({}, bounds, counts, 0.75);
  f.histogram({{"algorithm", "gcra"}}, bounds, counts, 0.75);
  EXPECT_EQ(out,
            "# HELP h_seconds Latency.\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"0.001\"} 2\n"
            "h_seconds_bucket{le=\"0.5\"} 2\n"
            "h_seconds_bucket{le=\"+Inf\"} 3\n"
            "h_seconds_sum 0.75\n"
            "h_seconds_count 3\n"
            "h_seconds_bucket{algorithm=\"gcra\",le=\"0.001\"} 2\n"
            "h_seconds_bucket{algorithm=\"gcra\",le=\"0.5\"} 2\n"
            "h_seconds_bucket{algorithm=\"gcra\",le=\"+Inf\"} 3\n"
            "h_seconds_sum{algorithm=\"gcra\"} 0.75\n"
            "h_seconds_count{algorithm=\"gcra\"} 3\n");
}

}  // namespace
}  // namespace floodgate::service
