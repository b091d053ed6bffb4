// floodgate override: run-time per-key overrides stored with the rules document in Redis
// (rules/overrides_store.hpp): set (with a required expiry), list, remove. docs/operations.md
// ("Per-key overrides") walks through them.
#pragma once

namespace floodgate::service {

// argv[1] is "override". Returns the exit code: 0 done, 1 failed (refused, Redis error), 2 usage.
int override_command(int argc, char** argv);

}  // namespace floodgate::service
