#include "histogram.hpp"

#include <gtest/gtest.h>

#include <random>

namespace floodgate::bench {
namespace {

TEST(histogram, small_values_are_exact) {
  for (std::uint64_t v = 0; v < 128; ++v) {
    EXPECT_EQ(histogram::bucket_of(v), v);
    EXPECT_EQ(histogram::highest_in(histogram::bucket_of(v)), v);
  }
}

TEST(histogram, every_value_lies_in_its_bucket_within_one_percent) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const auto v = rng() >> (24 + rng() % 40);
    const auto b = histogram::bucket_of(v);
    const auto hi = histogram::highest_in(b);
    ASSERT_GE(hi, v);
    ASSERT_LE(static_cast<double>(hi - v), 0.016 * static_cast<double>(v) + 0.5) << v;
    if (b > 0) {
      ASSERT_LT(histogram::highest_in(b - 1), v) << v;
    }
  }
}

TEST(histogram, buckets_are_contiguous) {
  for (std::size_t b = 1; b + 1 < histogram::bucket_count(); ++b)
    ASSERT_EQ(histogram::bucket_of(histogram::highest_in(b) + 1), b + 1) << b;
}

TEST(histogram, percentiles_of_a_uniform_range) {
  histogram h;
  for (std::uint64_t v = 1; v <= 10000; ++v) h.record(v);
  EXPECT_EQ(h.count(), 10000u);
  EXPECT_EQ(h.max(), 10000u);
  EXPECT_NEAR(static_cast<double>(h.percentile(0.5)), 5000, 5000 * 0.016);
  EXPECT_NEAR(static_cast<double>(h.percentile(0.99)), 9900, 9900 * 0.016);
  EXPECT_EQ(h.percentile(1.0), 10000u);
  EXPECT_DOUBLE_EQ(h.mean(), 5000.5);
}

TEST(histogram, merging_equals_recording_into_one) {
  histogram a, b, both;
  for (std::uint64_t v = 0; v < 5000; v += 3) {
    a.record(v);
    both.record(v);
  }
  for (std::uint64_t v = 100; v < 900000; v += 997) {
    b.record(v);
    both.record(v);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), both.count());
  EXPECT_EQ(a.max(), both.max());
  for (double q : {0.1, 0.5, 0.9, 0.99, 0.999}) EXPECT_EQ(a.percentile(q), both.percentile(q));
  const auto copy = histogram::from_buckets(a.buckets(), a.max(), a.sum());
  EXPECT_EQ(copy.count(), a.count());
  EXPECT_EQ(copy.percentile(0.99), a.percentile(0.99));
}

TEST(histogram, empty_reports_zero) {
  histogram h;
  EXPECT_EQ(h.percentile(0.5), 0u);
  EXPECT_EQ(h.max(), 0u);
}

}  // namespace
}  // namespace floodgate::bench
