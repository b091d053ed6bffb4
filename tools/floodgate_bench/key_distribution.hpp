// Which key each request goes to: uniform over K keys, or Zipf-skewed (key k with probability
// proportional to 1/(k+1)^s), as hot users are. Shared by the threads (read-only); each brings its
// own generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace floodgate::bench {

class key_distribution {
 public:
  // zipf = 0: uniform.
  key_distribution(std::size_t keys, double zipf);
  std::size_t keys() const noexcept { return keys_; }
  std::size_t pick(std::mt19937_64& rng) const;
  // The probability of key k (key 0 the most likely).
  double weight(std::size_t k) const noexcept;

 private:
  std::size_t keys_;
  std::vector<double> cdf_;  // empty when uniform
};

}  // namespace floodgate::bench
