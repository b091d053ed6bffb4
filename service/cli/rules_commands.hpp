// floodgate rules: the rules document floodgated --rules-from serves, in Redis
// (rules/rules_store.hpp): push, show, history, rollback. docs/operations.md walks through them.
#pragma once

namespace floodgate::service {

// argv[1] is "rules". Returns the exit code: 0 done, 1 failed (bad file, refused push, Redis
// error), 2 usage. Prints its own messages.
int rules_command(int argc, char** argv);

}  // namespace floodgate::service
