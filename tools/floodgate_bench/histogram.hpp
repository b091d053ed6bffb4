// A latency histogram in the HDR style: log-linear buckets (128 per power of two, so a
// recorded value is off by under 1%), fixed size, and mergeable by adding counts, so each
// thread and each process keeps its own and the parent adds them up.
//
//   histogram h;  h.record(latency_us);  other.merge(h);  other.percentile(0.99);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace floodgate::bench {

class histogram {
 public:
  static constexpr int sub_bucket_bits = 7;  // 2^7 sub-buckets: < 1% relative error
  static constexpr int max_value_bits = 40;  // values up to 2^40 (µs: 12 days)

  histogram();

  void record(std::uint64_t value);
  void merge(const histogram& other);

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept;
  // The smallest bucket bound that at least q (0..1] of the values are at or below; exact
  // max for q = 1. 0 when empty.
  std::uint64_t percentile(double q) const;

  // For sending across a pipe and rebuilding: the raw counts.
  std::span<const std::uint64_t> buckets() const noexcept { return buckets_; }
  static histogram from_buckets(std::span<const std::uint64_t> counts, std::uint64_t max,
                                std::uint64_t sum);
  std::uint64_t sum() const noexcept { return sum_; }

  // Bucket ↔ value, exposed for tests.
  static std::size_t bucket_of(std::uint64_t value) noexcept;
  static std::uint64_t highest_in(std::size_t bucket) noexcept;
  static std::size_t bucket_count() noexcept;

 private:
  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
  std::uint64_t sum_ = 0;
};

}  // namespace floodgate::bench
