// A segment tree over fixed positions 0..n-1: add a value to every position up to p, and ask
// the largest value among positions up to p, both in O(log n). The token-bucket accuracy check
// uses it to find the worst interval start in one query.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace floodgate::bench {

template <class T>
class prefix_max_tree {
 public:
  explicit prefix_max_tree(const std::vector<T>& initial)
      : n_(initial.size()), max_(4 * std::max<std::size_t>(n_, 1)), add_(max_.size(), T{}) {
    if (n_) build(1, 0, n_ - 1, initial);
  }

  void add_up_to(std::size_t p, T value) {
    if (n_) add(1, 0, n_ - 1, p, value);
  }
  T max_up_to(std::size_t p) const { return query(1, 0, n_ - 1, p); }

 private:
  void build(std::size_t node, std::size_t lo, std::size_t hi, const std::vector<T>& v) {
    if (lo == hi) {
      max_[node] = v[lo];
      return;
    }
    const auto mid = lo + (hi - lo) / 2;
    build(2 * node, lo, mid, v);
    build(2 * node + 1, mid + 1, hi, v);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
  }

  // add_[node] applies to the whole subtree and is already included in max_[node].
  void add(std::size_t node, std::size_t lo, std::size_t hi, std::size_t p, T value) {
    if (lo > p) return;
    if (hi <= p) {
      max_[node] += value;
      add_[node] += value;
      return;
    }
    const auto mid = lo + (hi - lo) / 2;
    add(2 * node, lo, mid, p, value);
    add(2 * node + 1, mid + 1, hi, p, value);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + add_[node];
  }

  T query(std::size_t node, std::size_t lo, std::size_t hi, std::size_t p) const {
    if (hi <= p) return max_[node];
    const auto mid = lo + (hi - lo) / 2;
    if (p <= mid) return query(2 * node, lo, mid, p) + add_[node];
    return std::max(max_[2 * node], query(2 * node + 1, mid + 1, hi, p)) + add_[node];
  }

  std::size_t n_;
  std::vector<T> max_;
  std::vector<T> add_;
};

}  // namespace floodgate::bench
