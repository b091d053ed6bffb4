#include "envoy_frontend.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "config/override_table.hpp"
#include "drain_watch.hpp"
#include "envoy_config.hpp"
#include "grpc_server.hpp"
#include "logging/log_format.hpp"
#include "rls_metrics.hpp"
#include "rls_service.hpp"
#include "telemetry/metrics.hpp"

namespace floodgate::service::envoy {

const char* envoy_flags::usage =
    R"(  --grpc-listen HOST:PORT   also serve Envoy's rate limit service API (gRPC:
                       envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health);
                       port 0 picks a free one (logged). Off unless given. docs/envoy.md.
  --grpc-max-connections N
                       open gRPC connections in all (default 1024; with --max-connections,
                       kept below the open-file limit). A new one over it is closed at once.
  --grpc-max-connections-per-peer N
                       open gRPC connections from one client address (default: a quarter of
                       --grpc-max-connections). Raise it for many Envoys behind one NAT.
  --envoy-config PATH  envoyproxy/ratelimit's config: a YAML file, or a directory whose *.yaml
                       files are each one domain. Repeatable; --config is then optional.
                       SIGHUP reloads it; a bad new file is logged and the old config stays.
  --envoy-config-watch reload the --envoy-config paths when they change, as SIGHUP does
                       (inotify; a burst of changes is one reload, 200 ms after the last;
                       Kubernetes' ConfigMap swaps and symlinks on the way are followed).
  --grpc-tls-cert FILE --grpc-tls-key FILE
                       serve gRPC over TLS only (PEM certificate chain and its key; clients
                       must offer ALPN h2, as Envoy and grpc-js do). Read at start-up: a
                       missing or bad file stops it, named.
  --grpc-tls-ca FILE   mutual TLS: a client must present a certificate these PEM CAs signed
                       (needs --grpc-tls-cert and --grpc-tls-key).
  --envoy-response-headers  add RateLimit-Limit, -Remaining and -Reset to responses.
  --envoy-shadow-mode  report statuses but always answer OK overall.
  --envoy-failure-mode error|rule
                       when Redis fails: error (default, as envoyproxy/ratelimit): the call
                       fails UNAVAILABLE and Envoy's failure_mode_deny decides; rule: each
                       rule's failure_mode answers (open: OK, closed: OVER_LIMIT).
)";

bool envoy_flags::parse(std::string_view arg, const std::function<std::string_view()>& next) {
  if (arg == "--grpc-listen") {
    grpc_listen = next();
    const auto colon = grpc_listen.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == grpc_listen.size()) {
      std::fprintf(stderr, "floodgated: --grpc-listen wants HOST:PORT\n(see floodgated --help)\n");
      std::exit(2);
    }
    return true;
  }
  if (arg == "--grpc-tls-cert" || arg == "--grpc-tls-key" || arg == "--grpc-tls-ca") {
    auto& file = arg == "--grpc-tls-cert" ? tls_cert : arg == "--grpc-tls-key" ? tls_key : tls_ca;
    file = next();
    if (file.empty()) {
      std::fprintf(stderr, "floodgated: %.*s needs a file\n(see floodgated --help)\n",
                   static_cast<int>(arg.size()), arg.data());
      std::exit(2);
    }
    return true;
  }
  if (arg == "--envoy-config") {
    configs.emplace_back(next());
    return true;
  }
  if (arg == "--envoy-response-headers") {
    response_headers = true;
    return true;
  }
  if (arg == "--envoy-config-watch") {
    watch = true;
    return true;
  }
  if (arg == "--envoy-shadow-mode") {
    shadow_mode = true;
    return true;
  }
  if (arg == "--envoy-failure-mode") {
    const auto v = next();
    if (v != "error" && v != "rule") {
      std::fprintf(stderr,
                   "floodgated: --envoy-failure-mode wants error or rule\n(see floodgated "
                   "--help)\n");
      std::exit(2);
    }
    failure_by_rule = v == "rule";
    return true;
  }
  return false;
}

std::string envoy_flags::problem() const {
  if (tls_cert.empty() != tls_key.empty())
    return "--grpc-tls-cert and --grpc-tls-key go together: give both or neither";
  if (!tls_ca.empty() && tls_cert.empty())
    return "--grpc-tls-ca (mutual TLS) needs --grpc-tls-cert and --grpc-tls-key";
  if (!tls_cert.empty() && grpc_listen.empty())
    return "--grpc-tls-cert is for the gRPC port: give --grpc-listen too";
  return {};
}

struct envoy_frontend::impl {
  impl(const envoy_flags& f, std::shared_ptr<floodgate::limiter> limiter,
       const runtime_overrides* live)
      : flags(f),
        store(load()),
        service(std::move(limiter), store, options_of(f, live), &rls_stats) {}

  static rls_options options_of(const envoy_flags& f, const runtime_overrides* live) {
    rls_options o;
    o.live = live;
    o.response_headers = f.response_headers;
    o.shadow_mode = f.shadow_mode;
    o.on_backend_failure = f.failure_by_rule ? backend_failure::rule : backend_failure::error;
    return o;
  }

  std::shared_ptr<const envoy_config> load() const {
    if (flags.configs.empty()) return std::make_shared<const envoy_config>();
    return load_envoy_config(flags.configs);
  }

  envoy_flags flags;
  rls_metrics rls_stats;
  envoy_config_store store;
  rls_service service;
  std::unique_ptr<grpc_server> server;
  std::unique_ptr<drain_watch> drain;  // after `server`, which it tells
};

envoy_frontend::envoy_frontend(const envoy_flags& flags,
                               std::shared_ptr<floodgate::limiter> limiter, metrics& stats,
                               const runtime_overrides* live)
    : impl_(std::make_unique<impl>(flags, std::move(limiter), live)) {
  const auto cfg = impl_->store.get();
  spdlog::info("msg=\"envoy config loaded\" domains={} rules={}", cfg->domains().size(),
               cfg->rule_count());
  stats.add_collector([i = impl_.get()](std::string& out) { i->rls_stats.append(out); });
  if (!flags.grpc_listen.empty()) {
    grpc_options options;
    options.address = flags.grpc_listen;
    options.caps.max_connections = flags.max_connections;
    options.caps.max_per_peer = flags.max_connections_per_peer != 0
                                    ? flags.max_connections_per_peer
                                    : std::max<std::size_t>(1, flags.max_connections / 4);
    if (!flags.tls_cert.empty())
      options.tls = tls_files{
          .cert_file = flags.tls_cert, .key_file = flags.tls_key, .ca_file = flags.tls_ca};
    impl_->server = std::make_unique<grpc_server>(options, impl_->service, impl_->rls_stats);
    spdlog::info(
        "msg=\"grpc listening\" address={} port={} max_connections={} max_connections_per_peer={} "
        "tls={}",
        quote(flags.grpc_listen), impl_->server->port(), options.caps.max_connections,
        options.caps.max_per_peer,
        !options.tls                   ? "off"
        : options.tls->ca_file.empty() ? "on"
                                       : "mutual");
    impl_->drain = std::make_unique<drain_watch>([s = impl_->server.get()] { s->begin_drain(); });
  }
}

envoy_frontend::~envoy_frontend() = default;

bool envoy_frontend::reload() {
  if (impl_->flags.configs.empty()) return true;
  try {
    auto next = impl_->load();
    const auto domains = next->domains().size();
    const auto rules = next->rule_count();
    impl_->store.set(std::move(next));
    spdlog::info("msg=\"envoy config reloaded\" domains={} rules={}", domains, rules);
    return true;
  } catch (const std::exception& e) {
    spdlog::error("msg=\"envoy config reload rejected; the old config stays\" error={}",
                  quote(e.what()));
    return false;
  }
}

std::shared_ptr<const envoy_config> envoy_frontend::config() const {
  return impl_->store.get();
}

namespace {
void reserving_policies_of(const std::vector<descriptor_node>& nodes,
                           std::vector<floodgate::policy>& out) {
  for (const auto& n : nodes) {
    if (n.limit && n.limit->policy && n.limit->policy->reserve() > 0)
      out.push_back(*n.limit->policy);
    if (n.limit && n.limit->overrides) n.limit->overrides->reserving_policies(out);
    reserving_policies_of(n.children, out);
  }
}
}  // namespace

void envoy_frontend::reserving_policies(std::vector<floodgate::policy>& out) const {
  const auto cfg = impl_->store.get();
  for (const auto& [name, d] : cfg->domains()) reserving_policies_of(d.descriptors, out);
}

void envoy_frontend::shutdown(std::chrono::milliseconds drain) {
  impl_->drain.reset();
  if (impl_->server) impl_->server->shutdown(drain);
}

}  // namespace floodgate::service::envoy
