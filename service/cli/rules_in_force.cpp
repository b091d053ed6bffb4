#include "cli/rules_in_force.hpp"

#include <chrono>

#include "cli/subcommands.hpp"
#include "rules/overrides_entries.hpp"
#include "rules/rules_store.hpp"

namespace floodgate::service::cli {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

rules_in_force read_rules_in_force(const rules_ref& ref) {
  rules_store store(ref, store_timeout);
  if (!store.why_not().empty()) fail(ref.describe() + ": " + store.why_not());
  std::string error;
  const auto head = store.head(error);
  if (!head) fail(ref.describe() + ": cannot read: " + error);
  if (head->version == 0) fail(ref.describe() + ": nothing pushed under this name yet");
  rules_in_force out{ref, ref.name + "@v" + std::to_string(head->version), head->version, {}};
  try {
    const bool cluster =
        ref.url.starts_with("redis+cluster:") || ref.url.starts_with("rediss+cluster:");
    out.rules =
        parse_config(head->text, out.name, cluster ? placement::one_key_per_group : placement::any);
  } catch (const std::exception& e) {
    fail(out.name + " does not load: " + e.what());
  }
  return out;
}

std::optional<config> read_rules_at(const rules_ref& ref, std::int64_t v, std::string& why) {
  rules_store store(ref, store_timeout);
  std::string error;
  const auto text = store.at(v, error);
  if (!text) {
    why = error.empty() ? "v" + std::to_string(v) + " is no longer in the history" : error;
    return std::nullopt;
  }
  try {
    return parse_config(text->text, ref.name + "@v" + std::to_string(v));
  } catch (const std::exception& e) {
    why = e.what();
    return std::nullopt;
  }
}

std::unique_ptr<runtime_overrides> read_live_overrides(const rules_in_force& in_force,
                                                       overrides_list* read) {
  overrides_store store(in_force.ref, store_timeout);
  if (!store.why_not().empty()) fail(in_force.ref.describe() + ": " + store.why_not());
  auto l = store.list();
  if (!l.error.empty())
    fail(in_force.ref.describe() + ": cannot read the run-time overrides: " + l.error);
  auto live = std::make_unique<runtime_overrides>();
  const auto now = unix_ms_now();
  (void)live->replace(in_force.rules, runtime_entries(l, now), now);
  if (read) *read = std::move(l);
  return live;
}

}  // namespace floodgate::service::cli
