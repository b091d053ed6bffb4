#include "core/give_back.hpp"

#include <algorithm>

namespace floodgate::core {
namespace {

// The grant's window is the current one, and the state counts it.
bool current(std::int64_t start, std::int64_t now, const params& p, std::int64_t window) {
  return floor_div(now, p.window) == window && start == window * p.window;
}

}  // namespace

std::int64_t give_back(any_state& s, std::int64_t now, const params& p, std::int64_t window,
                       std::int64_t units) {
  if (auto* f = std::get_if<fixed_window_state>(&s); f && current(f->start, now, p, window)) {
    const std::int64_t given = std::min(units, f->count);
    f->count -= given;
    return given;
  }
  if (auto* w = std::get_if<sliding_window_state>(&s); w && current(w->start, now, p, window)) {
    const std::int64_t given = std::min(units, w->current);
    w->current -= given;
    return given;
  }
  return 0;
}

}  // namespace floodgate::core
