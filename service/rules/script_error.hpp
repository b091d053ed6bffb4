// Redis's error for a script command an ACL refuses names no command, only a line ("ERR The
// user executing the script can't run this command or subcommand script: <sha>, on
// @user_script:19."); the script is ours, so the line's command can be named for the operator.
//
//   error = with_script_command(a.error, script);   // "... @user_script:19. (line 19: PUBLISH)"
#pragma once

#include <string>
#include <string_view>

namespace floodgate::service {

// `error` with " (line N: COMMAND)" added when it names a line of `script` that calls Redis
// (redis.call('COMMAND', ...)); otherwise `error` as it is.
std::string with_script_command(std::string error, std::string_view script);

}  // namespace floodgate::service
