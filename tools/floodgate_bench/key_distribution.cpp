#include "key_distribution.hpp"

#include <algorithm>
#include <cmath>

namespace floodgate::bench {

key_distribution::key_distribution(std::size_t keys, double zipf) : keys_(keys) {
  if (zipf <= 0 || keys <= 1) return;
  cdf_.reserve(keys);
  double total = 0;
  for (std::size_t k = 0; k < keys; ++k) {
    total += 1.0 / std::pow(static_cast<double>(k + 1), zipf);
    cdf_.push_back(total);
  }
  for (auto& c : cdf_) c /= total;
}

double key_distribution::weight(std::size_t k) const noexcept {
  if (k >= keys_) return 0;
  if (cdf_.empty()) return 1.0 / static_cast<double>(keys_);
  return k == 0 ? cdf_[0] : cdf_[k] - cdf_[k - 1];
}

std::size_t key_distribution::pick(std::mt19937_64& rng) const {
  if (keys_ <= 1) return 0;
  if (cdf_.empty()) return std::uniform_int_distribution<std::size_t>(0, keys_ - 1)(rng);
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
  return std::min<std::size_t>(static_cast<std::size_t>(it - cdf_.begin()), keys_ - 1);
}

}  // namespace floodgate::bench
