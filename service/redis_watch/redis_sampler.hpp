// Samples Redis's own view of itself (INFO: CPU, memory, evicted and expired keys, the command
// stats of floodgate's scripts) and its clock against this host's (TIME, clock_skew.hpp) every
// `interval`, on a thread of its own with its own connection per node (the library's
// redis_inspector, floodgate/inspect.hpp), off the decision path; /metrics renders the latest
// sample. A skew beyond max_clock_skew is logged once (warning), and again when it is back
// under (info).
//
//   redis_sampler sampler({.url = "redis://127.0.0.1:6379"});
//   stats.add_collector([&](std::string& out) { sampler.render(out); });
//
// Nodes (label node="host:port"): the one of a redis:// or rediss:// URL, the seeds of a
// redis+cluster:// URL (so the label's values are bounded by the URL), or for
// redis+sentinel:// the primary the sentinels name at each sample (asked in turn, the last to
// answer first; nothing is rendered until one has named it, and after a failover the new
// primary's series replace the old one's). TLS (rediss*) and credentials as the backend uses
// them, from the same URL and its options; each connect and each command within `timeout`.
// memory:// is not sampled: render() writes nothing.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis_watch/clock_skew.hpp"

namespace floodgate::service {

struct redis_sampler_options {
  std::string url;                                   // floodgated's --redis
  std::chrono::milliseconds interval{5000};          // between samples
  std::chrono::milliseconds timeout{1000};           // connect and each command
  std::chrono::microseconds max_clock_skew{100000};  // beyond it, a log line
};

class redis_sampler {
 public:
  explicit redis_sampler(redis_sampler_options options);  // starts sampling at once
  ~redis_sampler();                                       // stops the thread
  redis_sampler(const redis_sampler&) = delete;
  redis_sampler& operator=(const redis_sampler&) = delete;

  // Whether the URL names nodes to sample.
  bool enabled() const noexcept;
  // The latest sample as Prometheus families; thread-safe.
  void render(std::string& out) const;
  // Each node's latest clock sample (GET /v1/status); empty when not enabled; thread-safe.
  std::vector<node_clock> clocks() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service
