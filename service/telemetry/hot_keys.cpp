#include "telemetry/hot_keys.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace floodgate::service {

struct hot_keys::per_rule {
  per_rule(std::size_t capacity, clock::time_point now)
      : checked{space_saving(capacity), space_saving(capacity)},
        denied{space_saving(capacity), space_saving(capacity)},
        start(now),
        previous_start(now) {}

  // Moves to the generation `now` falls in: the current one becomes the previous one, or both
  // are cleared after a whole interval without records.
  void rotate(clock::time_point now, clock::duration interval) {
    if (now - start < interval) return;
    if (now - start >= 2 * interval) {
      for (auto* s : {&checked[0], &checked[1], &denied[0], &denied[1]}) s->clear();
      start = previous_start = now;
      return;
    }
    std::swap(checked[0], checked[1]);
    std::swap(denied[0], denied[1]);
    checked[0].clear();
    denied[0].clear();
    previous_start = start;
    start += interval;
  }

  mutable std::mutex mutex;
  space_saving checked[2];  // [0] the current generation, [1] the one before
  space_saving denied[2];
  clock::time_point start;           // of the current generation
  clock::time_point previous_start;  // of the one before (== start while there is none)
};

namespace {

// The two generations as one: a key missing from a full sketch occurred there at most its
// smallest count, which then adds to both the count and the error.
std::vector<space_saving::entry> merged(const space_saving& current, const space_saving& previous,
                                        std::size_t n) {
  std::unordered_map<std::string, space_saving::entry> by_key;
  const space_saving* gens[] = {&current, &previous};
  for (int g = 0; g < 2; ++g)
    for (auto& e : gens[g]->top(gens[g]->capacity())) {
      auto& m = by_key[e.key];
      if (m.key.empty()) {  // first seen (keys are never empty): what the other side says
        m.key = e.key;
        bool found = false;
        const auto& other = *gens[1 - g];
        other.count_of(e.key, &found);
        if (!found) m.count = m.error = other.min_count();  // else added in its own turn
      }
      m.count += e.count;
      m.error += e.error;
    }
  std::vector<space_saving::entry> out;
  out.reserve(by_key.size());
  for (auto& [k, e] : by_key) out.push_back(std::move(e));
  const auto k = std::min(n, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(),
                    [](const auto& a, const auto& b) {
                      return a.count != b.count ? a.count > b.count : a.key < b.key;
                    });
  out.resize(k);
  return out;
}

}  // namespace

hot_keys::hot_keys(hot_keys_options options) : options_(options) {}
hot_keys::~hot_keys() = default;

hot_keys::per_rule& hot_keys::of(std::string_view rule, clock::time_point now) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = rules_.find(rule); it != rules_.end()) return *it->second;
  }
  // Rules are few (the config's); like metrics, never forgotten.
  std::unique_lock lock(mutex_);
  auto& p = rules_[std::string(rule)];
  if (!p) p = std::make_unique<per_rule>(options_.capacity, now);
  return *p;
}

void hot_keys::record(std::string_view rule, std::string_view key, bool denied,
                      clock::time_point now) {
  auto& r = of(rule, now);
  std::lock_guard lock(r.mutex);
  r.rotate(now, options_.interval);
  r.checked[0].add(key);
  if (denied) r.denied[0].add(key);
}

hot_keys::report_t hot_keys::report(std::string_view rule, std::size_t n,
                                    clock::time_point now) const {
  report_t out;
  per_rule* r = nullptr;
  {
    std::shared_lock lock(mutex_);
    if (auto it = rules_.find(rule); it != rules_.end()) r = it->second.get();
  }
  if (!r) return out;
  std::lock_guard lock(r->mutex);
  r->rotate(now, options_.interval);
  out.span = std::chrono::duration_cast<std::chrono::milliseconds>(now - r->previous_start);
  out.checks = r->checked[0].total() + r->checked[1].total();
  out.denials = r->denied[0].total() + r->denied[1].total();
  out.checked = merged(r->checked[0], r->checked[1], n);
  out.denied = merged(r->denied[0], r->denied[1], n);
  return out;
}

}  // namespace floodgate::service
