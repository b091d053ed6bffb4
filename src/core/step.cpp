#include "core/step.hpp"

namespace floodgate::core {

any_state empty_state(algorithm a) {
  switch (a) {
    case algorithm::sliding_log: return sliding_log_state{};
    case algorithm::sliding_window: return sliding_window_state{};
    case algorithm::fixed_window: return fixed_window_state{};
    case algorithm::token_bucket: return token_bucket_state{};
    case algorithm::gcra: return gcra_state{};
  }
  return sliding_log_state{};
}

decision decide(const any_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  return std::visit([&](const auto& st) { return decide(st, now, p, cost); }, s);
}

void commit(any_state& s, std::int64_t now, const params& p, std::int64_t cost) {
  std::visit([&](auto& st) { commit(st, now, p, cost); }, s);
}

std::int64_t expiry(const any_state& s, std::int64_t now, const params& p) {
  return std::visit([&](const auto& st) { return expiry(st, now, p); }, s);
}

}  // namespace floodgate::core
