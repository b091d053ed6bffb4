// Watches configuration paths with inotify and says when they changed, once per burst of
// changes: a file written in place, a file replaced by rename, and Kubernetes' ConfigMap update
// (a new `..2026_…` directory, the `..data` symlink renamed over, the old directory removed),
// or a symlink on the way to the path swapped (upstream's RUNTIME_ROOT=/srv/runtime_data/current).
//
//   config_watch watch({"/etc/ratelimit/config"}, [&] { errands.request_reload(); });
//
// `changed` runs on the watch's own thread and should only hand the reload to another thread
// (floodgated's background errands read the files, as for SIGHUP). Watches are set again after
// each burst, so a directory that a symlink swap replaced is followed. Destruction stops the
// thread (within ~100 ms) before returning.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace floodgate::service {

struct config_watch_options {
  // A burst ends after this long without a change; then `changed` runs once.
  std::chrono::milliseconds quiet{200};
  // ... or after this long from its first change, for a writer that never stops.
  std::chrono::milliseconds max_delay{2000};
};

class config_watch {
 public:
  // Throws std::system_error when inotify is unavailable. A path that does not exist yet is
  // looked for again after each burst in its parent.
  config_watch(std::vector<std::string> paths, std::function<void()> changed,
               config_watch_options options = {});
  ~config_watch();
  config_watch(const config_watch&) = delete;
  config_watch& operator=(const config_watch&) = delete;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service
