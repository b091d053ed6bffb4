// The policy parameters a state's stored numbers are measured in, when there are any
// (docs/algorithms.md, "State and policy changes"). They are part of the state's key in both
// backends, so a state is never read in another policy's units: a reload that changes them
// starts the rule's keys afresh instead.
//
//   token_bucket  "<W/g>" (g = gcd(L, W)): the level is kept in units of g/W token (params::of)
//   gcra          the emission interval W/L as a reduced fraction, "<W/L>" when it is whole
//                 ms, else "<W/g>/<L/g>" (g = gcd): the TAT is kept in units of g/L ms
//                 (params::of), and is a debt of time that means a number of requests only at
//                 one interval
//   others        "": times, window indexes and counts mean the same under any policy
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string_view>

#include "core/params.hpp"
#include "floodgate/policy.hpp"

namespace floodgate::core {

class state_unit {
 public:
  explicit state_unit(const policy& p) noexcept {
    if (p.algo() == algorithm::token_bucket) {
      append(params::of(p).window);  // the reduced W its level is kept in
    } else if (p.algo() == algorithm::gcra) {
      const auto q = params::of(p);  // W and L reduced: the TAT is in units of 1/L ms
      append(q.window);
      if (q.limit != 1) {
        text_[size_++] = '/';
        append(q.limit);
      }
    }
  }
  std::string_view view() const noexcept { return {text_, size_}; }

 private:
  void append(std::int64_t v) noexcept {
    size_ = static_cast<std::size_t>(std::to_chars(text_ + size_, text_ + sizeof text_, v).ptr - text_);
  }
  char text_[48];
  std::size_t size_ = 0;
};

}  // namespace floodgate::core
