// Reading a configuration file (the rules file, the Envoy config) safely, on start-up and on
// SIGHUP: only a regular file, and without blocking on what is not one.
//
//   const std::string text = read_config_file(path);  // throws config_error naming `path`
#pragma once

#include <string>

namespace floodgate::service {

// The whole of the regular file at `path` (symbolic links followed). Throws config_error
// ("<path>: not a regular file (a FIFO)", "<path>: cannot open: <reason>", "<path>: cannot
// read: <reason>"). What is not a regular file is refused before anything is read, and a FIFO
// is refused even when swapped in between the check and the open: a directory would read as
// empty (the wrong message), a FIFO without a writer blocks open() until someone writes (on
// SIGHUP it held the thread that accepts connections), a device such as /dev/zero never ends.
std::string read_config_file(const std::string& path);

}  // namespace floodgate::service
