#include "histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace floodgate::bench {
namespace {

constexpr std::uint64_t sub_buckets = std::uint64_t{1} << histogram::sub_bucket_bits;
constexpr std::uint64_t half = sub_buckets / 2;
constexpr std::uint64_t max_value = (std::uint64_t{1} << histogram::max_value_bits) - 1;

}  // namespace

// Values below 2^7 have a bucket each. Above, a value of bit width w keeps its top 7 bits:
// shift s = w - 7, and each shift adds 64 buckets (the top bit is always set).
std::size_t histogram::bucket_of(std::uint64_t value) noexcept {
  value = std::min(value, max_value);
  if (value < sub_buckets) return static_cast<std::size_t>(value);
  const int shift = std::bit_width(value) - sub_bucket_bits;
  return static_cast<std::size_t>(sub_buckets + (shift - 1) * half + ((value >> shift) - half));
}

std::uint64_t histogram::highest_in(std::size_t bucket) noexcept {
  if (bucket < sub_buckets) return bucket;
  const std::uint64_t shift = (bucket - sub_buckets) / half + 1;
  const std::uint64_t top = (bucket - sub_buckets) % half + half;
  return ((top + 1) << shift) - 1;
}

std::size_t histogram::bucket_count() noexcept {
  return bucket_of(max_value) + 1;
}

histogram::histogram() : buckets_(bucket_count(), 0) {}

void histogram::record(std::uint64_t value) {
  ++buckets_[bucket_of(value)];
  ++count_;
  sum_ += value;
  max_ = std::max(max_, value);
}

void histogram::merge(const histogram& other) {
  for (std::size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
}

double histogram::mean() const noexcept {
  return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0;
}

std::uint64_t histogram::percentile(double q) const {
  if (count_ == 0) return 0;
  if (q >= 1) return max_;
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(highest_in(i), max_);
  }
  return max_;
}

histogram histogram::from_buckets(std::span<const std::uint64_t> counts, std::uint64_t max,
                                  std::uint64_t sum) {
  histogram h;
  const auto n = std::min(counts.size(), h.buckets_.size());
  for (std::size_t i = 0; i < n; ++i) {
    h.buckets_[i] = counts[i];
    h.count_ += counts[i];
  }
  h.max_ = max;
  h.sum_ = sum;
  return h;
}

}  // namespace floodgate::bench
