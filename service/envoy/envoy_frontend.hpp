// floodgated's Envoy part, wired from main.cpp in a few lines: its flags, its config (loaded
// at start-up and on SIGHUP), its metrics and its gRPC server.
//
//   envoy_flags ef;
//   if (ef.parse(arg, next)) continue;            // in the flag loop
//   envoy_frontend envoy(ef, limiter, stats);     // throws config_error / runtime_error
//   ... reload: envoy.reload(); ... after serving: envoy.shutdown(10s);
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/limiter.hpp"

namespace floodgate::service {
class metrics;
class runtime_overrides;  // config/runtime_overrides.hpp
}  // namespace floodgate::service

namespace floodgate::service::envoy {

struct envoy_flags {
  std::string grpc_listen;           // --grpc-listen HOST:PORT; empty: no gRPC server
  std::vector<std::string> configs;  // --envoy-config PATH (repeatable)
  bool response_headers = false;     // --envoy-response-headers
  bool shadow_mode = false;          // --envoy-shadow-mode
  bool watch = false;                // --envoy-config-watch: reload when the files change
  // --envoy-failure-mode error|rule: a backend failure is a gRPC error (UNAVAILABLE, upstream's
  // contract) or each rule's failure_mode answers.
  bool failure_by_rule = false;
  // --grpc-max-connections: open gRPC connections in all (main.cpp parses both, as it does
  // --max-connections, and lowers this one below the open-file limit).
  std::size_t max_connections = 1024;
  // --grpc-max-connections-per-peer: from one client address; 0: a quarter of the above.
  std::size_t max_connections_per_peer = 0;
  // --grpc-tls-cert, --grpc-tls-key: TLS on the gRPC port; --grpc-tls-ca: and a client
  // certificate from these CAs (mutual TLS). Empty: plaintext.
  std::string tls_cert, tls_key, tls_ca;

  static const char* usage;  // the lines for floodgated --help

  // True when `arg` is one of these flags (taking its value from `next` when it has one).
  // Exits with a usage error for a bad value, as main's other flags do.
  bool parse(std::string_view arg, const std::function<std::string_view()>& next);
  bool enabled() const noexcept { return !grpc_listen.empty() || !configs.empty(); }
  // What is wrong with these flags together (a usage error), or empty.
  std::string problem() const;
};

class envoy_config;

class envoy_frontend {
 public:
  // `live`: --rules-from's run-time overrides, which decide a value before the config's own
  // (rls_options::live); it must outlive this. Null: none.
  envoy_frontend(const envoy_flags& flags, std::shared_ptr<floodgate::limiter> limiter,
                 metrics& stats, const runtime_overrides* live = nullptr);
  ~envoy_frontend();
  envoy_frontend(const envoy_frontend&) = delete;
  envoy_frontend& operator=(const envoy_frontend&) = delete;

  // Reloads the --envoy-config files; a bad one is logged and the old config stays.
  // Returns whether it loaded.
  bool reload();
  // The config in force (what run-time overrides of Envoy rules are checked against).
  std::shared_ptr<const envoy_config> config() const;
  // Appends the policies of the config in force that reserve: its rate_limits' and their
  // overrides' (what a reload keeps reservations of: limiter::keep_reservations_of).
  void reserving_policies(std::vector<floodgate::policy>& out) const;
  // Health NOT_SERVING (also at the first SIGTERM or SIGINT, when the HTTP drain begins), then
  // finishes the calls in flight within `drain`.
  void shutdown(std::chrono::milliseconds drain);

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace floodgate::service::envoy
