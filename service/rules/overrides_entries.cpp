#include "rules/overrides_entries.hpp"

#include <chrono>

namespace floodgate::service {

runtime_override runtime_entry(const stored_override& o, std::int64_t redis_now_ms,
                               std::int64_t now) {
  const auto kind = o.prefix ? match_kind::prefix : match_kind::exact;
  override_spec spec{o.key, kind, {}, now + (o.expires_at_ms - redis_now_ms)};
  spec.fields.limit = o.limit;
  if (o.window_ms) spec.fields.window = std::chrono::milliseconds(*o.window_ms);
  spec.fields.burst = o.burst;
  return {o.rule, std::move(spec)};
}

std::vector<runtime_override> runtime_entries(const overrides_list& l, std::int64_t now) {
  std::vector<runtime_override> out;
  out.reserve(l.entries.size());
  for (const auto& o : l.entries) out.push_back(runtime_entry(o, l.redis_now_ms, now));
  return out;
}

}  // namespace floodgate::service
