// What floodgated --rules-from URL#NAME has in force, read by the CLI as floodgated reads it:
// the rules version (parsed by the same parser, errors named NAME@vN:LINE) and the run-time
// overrides stored with it, in a table built as floodgated builds its own. `floodgate override
// set|list` check entries against it; `floodgate inspect|reset --rules-from` resolve a key
// through it, so an override in force is never left out.
//
//   auto in_force = read_rules_in_force(parse_rules_ref("redis://127.0.0.1:6379#prod"));
//   const rule* api = in_force.rules.find("api");
//   auto live = read_live_overrides(in_force);   // the entries that apply now
//
// Fails (cli::fail, exit 1) when Redis cannot be read or the version does not load.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "config/runtime_overrides.hpp"
#include "rules/overrides_store.hpp"
#include "rules/rules_ref.hpp"

namespace floodgate::service::cli {

struct rules_in_force {
  rules_ref ref;
  std::string name;  // "NAME@vN", as floodgated names it in errors
  std::int64_t version = 0;
  config rules;
};

rules_in_force read_rules_in_force(const rules_ref& ref);
// Version `v` of the document, parsed; nullopt with why not (no longer in the history, Redis
// failed, or it does not load).
std::optional<config> read_rules_at(const rules_ref& ref, std::int64_t v, std::string& why);

// The run-time overrides stored under the same name, as a table built against `in_force`: the
// entries that apply now (those that would not are left out, as floodgated leaves them out).
// `read` gets the list as read (entries and Redis's clock).
std::unique_ptr<runtime_overrides> read_live_overrides(const rules_in_force& in_force,
                                                       overrides_list* read = nullptr);

std::int64_t unix_ms_now();

}  // namespace floodgate::service::cli
