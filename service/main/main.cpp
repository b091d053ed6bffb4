// floodgated: the rate-limit service. Start-up (flags, config, logging, backend) lives here;
// serving lives in server/server.cpp, the parts it wires together in the folders beside this.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "admin/admin.hpp"
#include "admin/inspector.hpp"
#include "config/config.hpp"
#include "config/config_store.hpp"
#include "config/config_watch.hpp"
#include "config/runtime_overrides.hpp"
#include "envoy/envoy_frontend.hpp"
#include "envoy/envoy_rule_names.hpp"
#include "floodgate/duration.hpp"
#include "floodgate/errors.hpp"
#include "floodgate/limiter.hpp"
#include "logging/log_format.hpp"
#include "logging/log_json.hpp"
#include "main/envoy_env.hpp"
#include "main/reservation_keeper.hpp"
#include "redis_watch/redis_sampler.hpp"
#include "rules/overrides_entries.hpp"
#include "rules/overrides_store.hpp"
#include "rules/overrides_watch.hpp"
#include "rules/rules_ref.hpp"
#include "rules/rules_store.hpp"
#include "rules/rules_watch.hpp"
#include "server/server.hpp"
#include "telemetry/hot_keys.hpp"
#include "telemetry/limiter_metrics.hpp"
#include "telemetry/metrics.hpp"
#include "telemetry/rules_metrics.hpp"

namespace {

using namespace floodgate::service;

constexpr const char* usage =
    R"(usage: floodgated --config FILE|--rules-from URL#NAME [--redis URL] [--listen HOST:PORT] [--io-threads N]
                  [--max-connections N] [--max-connections-per-peer N] [--log-level LEVEL]
                  [--instances N] [--grpc-listen HOST:PORT] [--envoy-config PATH ...]
                  [--admin-listen HOST:PORT [--admin-host NAME ...] [--top-keys N]
                   [--top-interval DURATION]]
                  [--redis-sample-interval DURATION] [--max-clock-skew DURATION]
                  [--log-format logfmt|json] [--envoy-env]

floodgated answers "may this request pass?" over HTTP for the rules in FILE.

  --config FILE        the rules (YAML; see examples/rules.yaml). Required unless
                       --envoy-config is given. A bad file stops start-up with FILE:LINE and
                       the problem. SIGHUP reloads it; a bad new file is logged and the old
                       rules stay.
  --rules-from REDIS-URL#NAME
                       the rules from Redis instead of a file: the document NAME that
                       `floodgate rules push` stores there (docs/operations.md). A new
                       version applies within 1 s, validated as a file reload is; a bad one
                       is logged and the rules in force stay, as they do while that Redis
                       is unreachable. No document yet (or Redis unreachable) stops start-up.
                       SIGHUP reads it again within 0.5 s.
  --redis URL          keep state in Redis (redis://[user:password@]host:port[/db]), shared by
                       every floodgated using it; a Redis Cluster: redis+cluster://host:port[,...];
                       Sentinel: redis+sentinel://host:port[,...]/master (docs/operations.md).
                       TLS: rediss://, rediss+cluster://, rediss+sentinel:// (options such
                       as ?tls_ca_file=PATH in docs/operations.md).
                       Without it, state lives in this process (memory://).
  --listen HOST:PORT   where to serve HTTP (default 127.0.0.1:8080; port 0 picks a free one,
                       logged at start-up). IPv6: [::1]:8080.
  --io-threads N       threads serving HTTP, each with its own connections (default: the
                       hardware's, 2 to 8). A machine that also runs the callers (or nginx)
                       often does best with fewer.
  --max-connections N  open HTTP connections in all (default 4096; kept 64 below the
                       open-file limit, or at half of it when that is under 128). A new
                       connection over the cap closes the longest-idle keep-alive connection;
                       when none is idle it gets a 503.
  --max-connections-per-peer N
                       open connections from one client address (default: a quarter of
                       --max-connections); over it, that address's longest-idle connection
                       is closed, or the new one refused. Raise it for a proxy in front.
  --instances N        for rules with failure_mode: local, the number of floodgated sharing
                       this Redis (each decides at limit ÷ N while Redis is unreachable).
                       Default: counted from the instances' heartbeats in Redis.
  --admin-listen HOST:PORT
                       serve the admin endpoints here (docs/operations.md): /metrics, /healthz,
                       /readyz, /v1/status, /v1/inspect, POST /v1/reset, the status page /ui,
                       and GET /v1/top when enabled. Bind it where only operators
                       reach. /metrics, /healthz and /readyz stay on --listen too; the admin-only
                       endpoints are never served there (404). Port 0 picks a free one (the
                       "admin listening" log line says which).
  --admin-host NAME    a host name the admin listener answers to (repeatable). It answers
                       requests whose Host is an IP address or localhost, and refuses others
                       (403) so a web page cannot reach it through DNS rebinding; give the
                       name Prometheus or your browser uses for it, if not an address.
  --top-keys N         keep, per rule, the N keys most often checked and most often denied
                       (space-saving sketches: fixed memory, counts within checks/N) and serve
                       them at GET /v1/top?rule=NAME on --admin-listen. Off by default: keys
                       are callers' data. 1 to 4096; 64 is a good start.
  --top-interval DURATION
                       hot keys cover the last one to two of these (default 60s).
  --redis-sample-interval DURATION
                       how often Redis's own view (INFO: CPU, memory, evictions; TIME: clock
                       skew) is sampled for /metrics, per node (default 5s; 1s to 1h).
  --max-clock-skew DURATION
                       Redis's clock this far from the host's is logged (warning), once, and
                       again when back under (default 100ms; 1ms to 1h). Decisions use Redis's
                       clock; skew makes Retry-After hints wrong for clients.
  --log-level LEVEL    trace, debug, info (default), warn (or warning), error, critical or off.
                       Logs go to stderr, one logfmt line per event; decisions are logged at
                       debug only.
  --log-format logfmt|json
                       logfmt (default): key=value pairs; json: one JSON object per line with
                       the same fields (ts, level, msg, ...), numbers as numbers.
  --envoy-env          also read envoyproxy/ratelimit's environment variables (REDIS_URL,
                       GRPC_PORT, RUNTIME_ROOT, ...: the table in docs/envoy.md). A flag on
                       the command line wins over the variable that means the same. An
                       upstream setting that floodgated does not implement stops start-up,
                       named.
  --help               this text.
Envoy's rate limit service (docs/envoy.md):
%s
Endpoints: POST /v1/check, GET /v1/auth/{rule}, GET /metrics, /healthz, /readyz
(docs/service.md); on --admin-listen: GET /metrics, /healthz, /readyz, /v1/top, /v1/status,
/v1/inspect, /ui, POST /v1/reset.
SIGTERM or SIGINT: stop accepting, finish requests in flight, exit 0.
)";
namespace envoy = floodgate::service::envoy;
using namespace std::chrono_literals;

struct flags {
  std::string config_path;
  std::optional<rules_ref> rules_from;  // --rules-from
  std::string backend_url = "memory://";
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::size_t io_threads = 0;  // 0: server_options' default
  int instances = 0;           // 0: counted by heartbeats
  std::size_t max_connections = server_options{}.max_connections;
  std::size_t max_connections_per_peer = 0;  // 0: a quarter of max_connections
  spdlog::level::level_enum log_level = spdlog::level::info;
  bool log_json = false;  // --log-format json
  envoy::envoy_flags envoy;
  std::optional<std::pair<std::string, std::uint16_t>> admin;  // --admin-listen
  std::vector<std::string> admin_hosts;                        // --admin-host
  std::size_t top_keys = 0;                                    // 0: hot keys off
  std::chrono::milliseconds top_interval{60000};
  std::chrono::milliseconds redis_sample_interval{5000};
  std::chrono::milliseconds max_clock_skew{100};
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "floodgated: %s\n(see floodgated --help)\n", message.c_str());
  std::exit(2);
}

std::optional<spdlog::level::level_enum> parse_level(std::string_view s) {
  using spdlog::level::level_enum;
  constexpr std::pair<std::string_view, level_enum>
      levels[] = {{"trace", level_enum::trace},  {"debug", level_enum::debug},
                  {"info", level_enum::info},    {"warn", level_enum::warn},
                  {"warning", level_enum::warn},  // what the log lines say (level=warning)
                  {"error", level_enum::err},    {"critical", level_enum::critical},
                  {"off", level_enum::off}};
  for (const auto& [name, level] : levels)
    if (name == s) return level;
  return std::nullopt;
}

std::pair<std::string, std::uint16_t> parse_address(std::string_view flag, std::string_view s) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    usage_error(std::string(flag) + " wants HOST:PORT");
  auto host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto port_text = s.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port > 65535)
    usage_error(std::string(flag) + ": '" + std::string(port_text) + "' is not a port");
  return {std::string(host), static_cast<std::uint16_t>(port)};
}

// A duration from `min` to `max`, or a usage error saying so.
std::chrono::milliseconds parse_duration_flag(std::string_view flag, std::string_view v,
                                              std::string_view range, std::chrono::milliseconds min,
                                              std::chrono::milliseconds max) {
  const auto d = floodgate::parse_duration(v);
  if (!d || *d < min || *d > max)
    usage_error(std::string(flag) + ": '" + std::string(v) + "' is not a duration from " +
                std::string(range) + " (such as 5s or 250ms)");
  return *d;
}

std::size_t parse_count(std::string_view flag, std::string_view v, std::size_t max) {
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size() || n < 1 || n > max)
    usage_error(std::string(flag) + ": '" + std::string(v) + "' is not a number from 1 to " +
                std::to_string(max));
  return n;
}

flags parse_flags(int argc, char** argv) {
  flags f;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    bool inline_value = false;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    if (arg == "--help" || arg == "-h") {
      std::printf(usage, envoy::envoy_flags::usage);
      std::exit(0);
    }
    auto next = [&]() -> std::string_view {
      if (inline_value) return value;
      if (i + 1 >= argc) usage_error(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (f.envoy.parse(arg, next)) {
      continue;
    } else if (arg == "--config") {
      f.config_path = next();
    } else if (arg == "--rules-from") {
      try {
        f.rules_from = parse_rules_ref(next());
      } catch (const floodgate::config_error& e) {
        usage_error(std::string("--rules-from: ") + e.what());
      }
    } else if (arg == "--redis") {
      f.backend_url = next();
    } else if (arg == "--listen") {
      std::tie(f.host, f.port) = parse_address(arg, next());
    } else if (arg == "--admin-listen") {
      f.admin = parse_address(arg, next());
    } else if (arg == "--admin-host") {
      const auto name = next();
      const bool valid =
          !name.empty() && name.size() <= 253 && std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
          });
      if (!valid)
        usage_error("--admin-host: '" + std::string(name) +
                    "' is not a host name (letters, digits, '-' and '.'; no port)");
      f.admin_hosts.emplace_back(name);
    } else if (arg == "--top-keys") {
      f.top_keys = parse_count(arg, next(), 4096);
    } else if (arg == "--top-interval") {
      const auto v = next();
      const auto d = floodgate::parse_duration(v);
      if (!d || d->count() < 1000)
        usage_error("--top-interval: '" + std::string(v) + "' is not a duration of 1s or more");
      f.top_interval = *d;
    } else if (arg == "--redis-sample-interval") {
      f.redis_sample_interval = parse_duration_flag(arg, next(), "1s to 1h", 1s, 1h);
    } else if (arg == "--max-clock-skew") {
      f.max_clock_skew = parse_duration_flag(arg, next(), "1ms to 1h", 1ms, 1h);
    } else if (arg == "--io-threads") {
      f.io_threads = parse_count(arg, next(), 256);
    } else if (arg == "--instances") {
      f.instances = static_cast<int>(parse_count(arg, next(), 100'000));
    } else if (arg == "--max-connections") {
      f.max_connections = parse_count(arg, next(), 1'000'000);
    } else if (arg == "--max-connections-per-peer") {
      f.max_connections_per_peer = parse_count(arg, next(), 1'000'000);
    } else if (arg == "--grpc-max-connections") {  // listed in envoy_flags::usage
      f.envoy.max_connections = parse_count(arg, next(), 1'000'000);
    } else if (arg == "--grpc-max-connections-per-peer") {
      f.envoy.max_connections_per_peer = parse_count(arg, next(), 1'000'000);
    } else if (arg == "--log-format") {
      const auto v = next();
      if (v != "logfmt" && v != "json") usage_error("--log-format wants logfmt or json");
      f.log_json = v == "json";
    } else if (arg == "--log-level") {
      const auto v = next();
      const auto level = parse_level(v);
      if (!level) usage_error("--log-level: unknown level '" + std::string(v) + "'");
      f.log_level = *level;
    } else {
      usage_error("unknown argument '" + std::string(arg) + "'");
    }
  }
  if (!f.admin_hosts.empty() && !f.admin)
    usage_error("--admin-host names the admin listener: give --admin-listen too");
  if (f.top_keys != 0 && !f.admin)
    usage_error("--top-keys serves hot keys on the admin listener: give --admin-listen too");
  if (const auto problem = f.envoy.problem(); !problem.empty()) usage_error(problem);
  if (!f.config_path.empty() && f.rules_from)
    usage_error("--config and --rules-from both name the rules: give one");
  if (f.config_path.empty() && !f.rules_from && f.envoy.configs.empty())
    usage_error("--config FILE is required (or --rules-from URL#NAME, or --envoy-config PATH)");
  return f;
}

// Connections beyond what the file-descriptor limit allows would fail in accept() (and take
// the descriptors the backend needs): HTTP's and gRPC's caps together stay below it, keeping 64
// for everything else, or half the limit when the limit is under 128. When both do not fit,
// each gets a share of the room in proportion to what it asked for (docs/service.md says the
// same). `grpc_wanted` is 0 without --grpc-listen.
struct connection_budgets {
  std::size_t http = 0;
  std::size_t grpc = 0;
};
connection_budgets connection_budget(std::size_t http_wanted, std::size_t grpc_wanted) {
  connection_budgets b{http_wanted, grpc_wanted};
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return b;
  const auto fds = static_cast<std::size_t>(limit.rlim_cur);
  const std::size_t reserve = std::min<std::size_t>(64, fds / 2);
  const std::size_t room = fds - reserve;
  if (http_wanted + grpc_wanted > room) {
    b.grpc = grpc_wanted == 0
                 ? 0
                 : std::max<std::size_t>(1, room * grpc_wanted / (http_wanted + grpc_wanted));
    b.http = std::max<std::size_t>(1, room > b.grpc ? room - b.grpc : 1);
  }
  if (b.http < http_wanted)
    spdlog::warn(
        "msg=\"max_connections lowered to stay below the open-file limit\" wanted={} "
        "max_connections={} open_file_limit={} reserved={}",
        http_wanted, b.http, fds, reserve);
  if (b.grpc < grpc_wanted)
    spdlog::warn(
        "msg=\"grpc max_connections lowered to stay below the open-file limit\" wanted={} "
        "max_connections={} open_file_limit={} reserved={}",
        grpc_wanted, b.grpc, fds, reserve);
  return b;
}

// --log-format json: the logfmt line's fields as one JSON object (logging/log_json.hpp).
class json_log_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto t = std::chrono::system_clock::to_time_t(msg.time);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char date[32], zone[8], ts[48];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    std::strftime(zone, sizeof zone, "%z", &tm);
    std::snprintf(ts, sizeof ts, "%s.%03d%s", date, static_cast<int>(ms), zone);
    const auto level = spdlog::level::to_string_view(msg.level);
    auto line = logfmt_to_json(ts, std::string_view(level.data(), level.size()),
                               std::string_view(msg.payload.data(), msg.payload.size()));
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_log_formatter>();
  }
};

void setup_logging(spdlog::level::level_enum level, bool json) {
  auto logger = spdlog::stderr_logger_mt("floodgated");
  if (json)
    logger->set_formatter(std::make_unique<json_log_formatter>());
  else
    logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);  // a line per event, never lost in a buffer
  spdlog::set_default_logger(std::move(logger));
}

// The server's options from the flags, with `max_connections` from connection_budget.
server_options server_options_from(const flags& f, std::size_t max_connections) {
  server_options options;
  options.host = f.host;
  options.port = f.port;
  options.threads = f.io_threads;
  options.max_connections = max_connections;
  options.max_connections_per_peer = f.max_connections_per_peer != 0
                                         ? f.max_connections_per_peer
                                         : std::max<std::size_t>(1, options.max_connections / 4);
  return options;
}

// The limiter's options: the same caps on keys and items as the HTTP handler's.
floodgate::limiter_options limiter_options_from(const flags& f, const request_limits& limits) {
  floodgate::limiter_options options;
  options.max_key_size = limits.max_key_size;
  options.max_items = limits.max_items;
  options.instances = f.instances;
  return options;
}

// The rules at start-up: the file's, or none (only --envoy-config). Throws config_error.
std::shared_ptr<const config> initial_rules(const std::string& path, placement where) {
  auto rules = path.empty() ? std::make_shared<const config>()
                            : std::make_shared<const config>(load_config(path, where));
  spdlog::info("msg=\"config loaded\" file={} rules={} groups={}", quote(path),
               rules->rules().size(), rules->groups().size());
  return rules;
}

// SIGHUP: the Envoy config (if any) and the rules file again; a bad file keeps the old rules.
// Each change goes through `keeper`, which gives back what is reserved under policies dropped.
void reload(config_store& store, metrics& stats, envoy::envoy_frontend* envoy_api, placement where,
            const std::string& path, reservation_keeper& keeper) {
  if (envoy_api)
    keeper.change("envoy config reload", [&] { stats.record_reload(envoy_api->reload()); });
  if (path.empty()) return;
  try {
    auto next = std::make_shared<const config>(load_config(path, where));
    const auto n = next->rules().size();
    const auto groups = next->groups().size();
    keeper.change("rules reload", [&] { store.set(std::move(next)); });
    stats.record_reload(true);
    spdlog::info("msg=\"config reloaded\" file={} rules={} groups={}", quote(path), n, groups);
  } catch (const std::exception& e) {
    stats.record_reload(false);
    spdlog::error("msg=\"config reload rejected; the old rules stay\" error={}", quote(e.what()));
  }
}

// --rules-from: version `v` of the document, validated as a file reload is (the same parser,
// errors named NAME@vN:LINE), put in force; or why not, logged, the rules in force staying.
std::string apply_rules(config_store& store, metrics& stats, placement where, const rules_ref& from,
                        const rules_version& v) {
  const auto name = from.name + "@v" + std::to_string(v.version);
  try {
    auto next = std::make_shared<const config>(parse_config(v.text, name, where));
    const auto n = next->rules().size();
    const auto groups = next->groups().size();
    store.set(std::move(next));
    stats.record_reload(true);
    spdlog::info("msg=\"rules version applied\" rules_from={} version={} by={} rules={} groups={}",
                 quote(from.describe()), v.version, quote(v.by), n, groups);
    return {};
  } catch (const std::exception& e) {
    stats.record_reload(false);
    spdlog::error(
        "msg=\"rules version refused; the rules in force stay\" rules_from={} version={} "
        "error={}",
        quote(from.describe()), v.version, quote(e.what()));
    return e.what();
  }
}

// What a run-time override may name (config/runtime_overrides.hpp): the rules in force and,
// with --envoy-config, the Envoy config's rate_limits (envoy/envoy_rule_names.hpp), as now.
struct override_targets {
  std::shared_ptr<const config> rules;
  std::map<std::string, rule, std::less<>> envoy_rules;

  override_targets(const config_store& store, const envoy::envoy_frontend* envoy_api)
      : rules(store.get()),
        envoy_rules(envoy_api ? envoy::envoy_override_rules(*envoy_api->config())
                              : std::map<std::string, rule, std::less<>>{}) {}
  rule_lookup lookup() const {
    return [this](std::string_view name) -> const rule* {
      if (!name.starts_with(envoy_rule_prefix)) return rules->find(name);
      const auto it = envoy_rules.find(name);
      return it == envoy_rules.end() ? nullptr : &it->second;
    };
  }
};

// --rules-from: the run-time table made equal to the entries read from Redis (`l`), each
// checked against the rules in force as `floodgate override set` checked it; an entry the
// table refuses (its rule changed since) is logged and left out.
void sync_overrides(runtime_overrides& live, const override_targets& to, const overrides_list& l) {
  const auto now = unix_ms_now();
  for (const auto& why : live.replace(to.lookup(), runtime_entries(l, now), now))
    spdlog::warn("msg=\"run-time override not applied\" error={}", quote(why));
  spdlog::info("msg=\"run-time overrides applied\" version={} live={}", l.version,
               live.list(now).size());
}

// --rules-from at start-up: the version in force, which must exist and be valid. Throws
// config_error.
rules_version initial_rules_from(rules_store& rules) {
  const auto& from = rules.ref();
  if (!rules.why_not().empty())
    throw floodgate::config_error("--rules-from " + from.describe() + ": " + rules.why_not());
  std::string error;
  auto head = rules.head(error);
  if (!head)
    throw floodgate::config_error("--rules-from " + from.describe() + ": cannot read: " + error);
  if (head->version == 0)
    throw floodgate::config_error("--rules-from " + from.describe() +
                                  ": no rules pushed under this name yet (floodgate rules push "
                                  "FILE --to " +
                                  from.describe() + ")");
  return *head;
}

// floodgated's own thread, for three errands that must not hold an I/O thread:
// - SIGHUP's reloads: reading and parsing the files (a slow disk, 10,000 rules) must not hold
//   the I/O thread that took the signal, which also accepts connections. A SIGHUP while a
//   reload runs asks for one more after it, which reads the files as they are then; any number
//   of them make that one.
// - Telling the operator why the backend fails, in the server's own words (WRONGPASS, NOPERM, a
//   bad db index, an unresolvable host, a Redis too old): at start-up, then whenever the reason
//   changes or clears. Polled once a second, so a flapping reason costs one line a second at
//   most; calls themselves log nothing of it. (A long reload delays the next look, no more.)
// - Once a second too, giving back what checks under replaced rules reserved after a change
//   (reservation_keeper::settle).
class background {
 public:
  // `settle` runs after each look (reservation_keeper::settle).
  background(std::shared_ptr<floodgate::limiter> limiter, std::function<void()> reload,
             std::function<void()> settle)
      : limiter_(std::move(limiter)),
        reload_(std::move(reload)),
        settle_(std::move(settle)),
        thread_([this](std::stop_token stop) { run(stop); }) {}

  // From any thread (the signal's); returns at once.
  void request_reload() {
    {
      std::lock_guard lock(mutex_);
      reload_pending_ = true;
    }
    wake_.notify_one();
  }

 private:
  void run(const std::stop_token& stop) {
    auto& b = limiter_->get_backend();
    std::string told;
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      lock.unlock();
      std::string now = b.last_error();
      if (now != told) {
        if (!now.empty())
          spdlog::error("msg=\"backend failing\" backend={} ready={} error={}", b.kind(),
                        b.healthy(), quote(now));
        else
          spdlog::info("msg=\"backend answering again\" backend={}", b.kind());
        told = std::move(now);
      }
      settle_();
      lock.lock();
      if (wake_.wait_for(lock, stop, std::chrono::seconds(1), [this] { return reload_pending_; })) {
        reload_pending_ = false;
        lock.unlock();
        reload_();
        lock.lock();
      }
    }
  }

  std::shared_ptr<floodgate::limiter> limiter_;
  std::function<void()> reload_;
  std::function<void()> settle_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  bool reload_pending_ = false;
  std::jthread thread_;  // last: it starts once the members it uses exist; stopped and joined first
};

// /metrics beyond the service's own counters, in this order: the library's (what a Redis
// Cluster or Sentinel backend saw: zero on the others), Redis's own view (INFO, sampled off the
// decision path; nothing for memory://), and /readyz as a gauge, for alerts
// (examples/prometheus/floodgate-alerts.yml).
void add_collectors(metrics& stats, const std::shared_ptr<floodgate::limiter>& limiter,
                    const redis_sampler& sampler) {
  stats.add_collector([l = limiter](std::string& out) { append_limiter_metrics(out, *l); });
  if (sampler.enabled()) stats.add_collector([&sampler](std::string& out) { sampler.render(out); });
  stats.add_collector([l = limiter](std::string& out) { append_backend_ready(out, *l); });
}

// What the admin listener reads, and its handler: route_admin, with key requests (/v1/inspect,
// /v1/reset) run by `keys`, a worker of its own (it waits on Redis).
using admin_handler = std::function<void(const http_request&, std::function<void(http_response)>)>;
admin_handler make_admin_handler(const flags& f, const server_options& options, metrics& stats,
                                 const std::shared_ptr<floodgate::limiter>& limiter,
                                 const hot_keys* top, const config_store& store,
                                 const redis_sampler& sampler, inspector* keys,
                                 std::function<rules_state()> rules_source) {
  admin_sources sources{&stats,
                        [l = limiter] {
                          auto& b = l->get_backend();
                          return backend_state{b.healthy(), std::string(b.kind()), b.last_error()};
                        },
                        top, &store};
  if (sampler.enabled()) sources.clocks = [&sampler] { return sampler.clocks(); };
  sources.rules_source = std::move(rules_source);
  sources.keys = true;
  sources.max_key_size = options.limits.max_key_size;
  sources.host_names = f.admin_hosts;
  return [sources, keys](const http_request& req, std::function<void(http_response)> done) {
    auto routed = route_admin(req, sources);
    if (auto* r = std::get_if<key_request>(&routed)) return keys->submit(std::move(*r), done);
    done(std::move(std::get<http_response>(routed)));
  };
}

// What is left of `drain` since the drain began (steady ns; 0: it never did, e.g. a listener
// failed: then all of it).
std::chrono::milliseconds drain_left(std::chrono::milliseconds drain, std::int64_t started_ns) {
  if (started_ns == 0) return drain;
  const auto started = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(started_ns));
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  return std::max(std::chrono::milliseconds{0}, drain - spent);
}

// With --envoy-env, the command line with the environment's flags in front (main/envoy_env.hpp);
// otherwise as it is. `notes` gets what the environment set that needs no flag.
std::vector<std::string> with_envoy_env(int argc, char** argv, std::vector<std::string>& notes) {
  std::vector<std::string> args(argv, argv + argc);
  const auto it = std::find(args.begin() + 1, args.end(), "--envoy-env");
  if (it == args.end()) return args;
  args.erase(it);
  std::set<std::string, std::less<>> given;
  for (std::string_view a : args)
    if (a.starts_with("--")) given.emplace(a.substr(0, a.find('=')));
  try {
    auto env = read_envoy_env([](const char* name) { return std::getenv(name); }, given);
    std::vector<std::string> out{args.front()};
    for (auto& [flag, value] : env.flags) {
      out.push_back(flag);
      if (!value.empty()) out.push_back(std::move(value));
    }
    out.insert(out.end(), args.begin() + 1, args.end());
    notes = std::move(env.notes);
    for (const auto& [flag, value] : env.flags) notes.push_back("from the environment: " + flag);
    return out;
  } catch (const envoy_env_error& e) {
    usage_error(std::string("--envoy-env: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> env_notes;
  auto args = with_envoy_env(argc, argv, env_notes);
  std::vector<char*> arg_ptrs;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  const flags f = parse_flags(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  setup_logging(f.log_level, f.log_json);
  for (const auto& note : env_notes) spdlog::info("msg=\"envoy-env\" setting={}", quote(note));
  try {
    const auto budgets = connection_budget(
        f.max_connections, f.envoy.grpc_listen.empty() ? 0 : f.envoy.max_connections);
    server_options options = server_options_from(f, budgets.http);
    // The backend first (it connects in the background): whether the rules fit depends on it.
    auto limiter = std::make_shared<floodgate::limiter>(f.backend_url, floodgate::backend_options{},
                                                        limiter_options_from(f, options.limits));
    const auto where = limiter->get_backend().check_all_needs_one_key()
                           ? placement::one_key_per_group
                           : placement::any;
    // --rules-from: the document's version in force, checked as a file is at start-up.
    std::unique_ptr<rules_store> rules;
    rules_version first;
    std::shared_ptr<const config> first_rules;
    if (f.rules_from) {
      rules = std::make_unique<rules_store>(*f.rules_from, 1s);  // each read's deadline
      first = initial_rules_from(*rules);
      first_rules = std::make_shared<const config>(parse_config(
          first.text, f.rules_from->name + "@v" + std::to_string(first.version), where));
      spdlog::info("msg=\"config loaded\" rules_from={} version={} by={} rules={} groups={}",
                   quote(f.rules_from->describe()), first.version, quote(first.by),
                   first_rules->rules().size(), first_rules->groups().size());
    } else {
      first_rules = initial_rules(f.config_path, where);
    }
    config_store store(std::move(first_rules));
    runtime_overrides live;  // --rules-from's run-time overrides (empty otherwise)
    metrics stats;
    redis_sampler sampler({.url = f.backend_url,
                           .interval = f.redis_sample_interval,
                           .max_clock_skew = f.max_clock_skew});
    add_collectors(stats, limiter, sampler);
    // Before the watches, whose run-time overrides may name its rules (and which stop first).
    std::unique_ptr<envoy::envoy_frontend> envoy_api;
    if (f.envoy.enabled()) {
      auto envoy_flags = f.envoy;
      envoy_flags.max_connections = budgets.grpc;
      envoy_api = std::make_unique<envoy::envoy_frontend>(envoy_flags, limiter, stats,
                                                          rules ? &live : nullptr);
    }
    // Every change of what is in force goes through it (after what it reads, before what
    // changes through it): what is reserved under a policy no longer in force goes back.
    reservation_keeper keeper(
        limiter,
        [&store, &live, e = envoy_api.get()](std::vector<floodgate::policy>& out) {
          store.get()->reserving_policies(out);
          if (e) e->reserving_policies(out);
          live.current()->reserving_policies(out);
        },
        [&store, &live, e = envoy_api.get()] {
          std::vector<std::shared_ptr<const void>> held{store.get(), live.current()};
          if (e) held.push_back(e->config());
          return held;
        });
    // The watches: after `store`, `live` and `stats`, which they set, so they stop first;
    // before the collectors and the admin handler that read them. The overrides' are loaded
    // before the first request and stop after the rules watch, which tells them of reloads.
    std::unique_ptr<overrides_store> override_source;
    std::unique_ptr<overrides_watch> overrides_watcher;
    std::unique_ptr<rules_watch> rules_watcher;
    if (rules) {
      override_source = std::make_unique<overrides_store>(*f.rules_from, 1s);
      overrides_watcher = std::make_unique<overrides_watch>(
          *override_source, [&store, &live, &keeper, e = envoy_api.get()](const overrides_list& l) {
            keeper.change("run-time overrides",
                          [&] { sync_overrides(live, override_targets(store, e), l); });
          });
      rules_watcher = std::make_unique<rules_watch>(
          *rules, first,
          [&store, &stats, &live, &keeper, where, &from = *f.rules_from, e = envoy_api.get(),
           ow = overrides_watcher.get()](const rules_version& v) {
            std::string refused;
            // The version and the run-time entries rebuilt for it are one change.
            keeper.change("rules version", [&] {
              refused = apply_rules(store, stats, where, from, v);
              if (!refused.empty()) return;
              // Each entry rebuilt against its rule's new version, or dropped (logged); then
              // read again from Redis, so an entry dropped by an older version comes back when
              // its rule does.
              const override_targets to(store, e);
              for (const auto& m : live.rebind(to.lookup(), unix_ms_now()))
                spdlog::warn("msg=\"run-time override dropped\" version={} error={}", v.version,
                             quote(m));
              spdlog::info("msg=\"run-time overrides rebound\" version={} live={}", v.version,
                           live.list(unix_ms_now()).size());
            });
            if (refused.empty()) ow->resync();
            return refused;
          });
    }
    const std::function<rules_state()> rules_source = [w = rules_watcher.get(), &f, &live,
                                                       ow = overrides_watcher.get()] {
      if (w) {
        auto s = w->state();
        s.runtime_overrides = live.list(unix_ms_now()).size();
        s.overrides_version = std::max<std::int64_t>(ow->version(), 0);
        return s;
      }
      rules_state file;
      file.where = f.config_path;
      return file;
    };
    if (rules_watcher)
      stats.add_collector(
          [rules_source](std::string& out) { append_rules_metrics(out, rules_source()); });
    // Hot keys: fixed memory per rule, fed on the decision path only when asked for.
    std::unique_ptr<hot_keys> top;
    if (f.top_keys != 0)
      top = std::make_unique<hot_keys>(hot_keys_options{f.top_keys, f.top_interval});
    options.top = top.get();
    if (rules) options.live = &live;
    std::unique_ptr<inspector> keys;
    if (f.admin) {
      options.admin_host = f.admin->first;
      options.admin_port = f.admin->second;
      keys = std::make_unique<inspector>(limiter, f.backend_url, rules ? &live : nullptr);
      options.admin_handler = make_admin_handler(f, options, stats, limiter, top.get(), store,
                                                 sampler, keys.get(), rules_source);
    }
    const auto drain = options.drain_timeout;
    // SIGTERM's one budget: the HTTP drain, then the gRPC drain in what is left of it (it had a
    // whole drain_timeout of its own after the HTTP one). Slow inspects do not hold the drain:
    // the waiting ones get a 503 at once, the running one's raw read is cut short.
    std::atomic<std::int64_t> drain_started_ns{0};
    options.on_drain = [&drain_started_ns, k = keys.get()] {
      drain_started_ns = std::chrono::steady_clock::now().time_since_epoch().count();
      if (k) k->cancel();
    };
    // Declared after what a reload uses, so it is stopped (a reload in progress finished)
    // before any of that goes.
    background errands(
        limiter,
        [&store, &stats, &envoy_api, &keeper, where, &path = f.config_path, w = rules_watcher.get(),
         ow = overrides_watcher.get()] {
          reload(store, stats, envoy_api.get(), where, path, keeper);
          if (w) w->poke();      // --rules-from: read Redis within an interval
          if (ow) ow->resync();  // ... and every run-time override again
        },
        [&keeper] { keeper.settle(); });
    // After `errands`, which it tells, so it stops first.
    std::unique_ptr<config_watch> watch;
    if (f.envoy.watch && !f.envoy.configs.empty()) {
      watch = std::make_unique<config_watch>(f.envoy.configs, [&errands] {
        spdlog::info("msg=\"config files changed; reloading\"");
        errands.request_reload();
      });
    }
    server srv(std::move(options), std::move(limiter), store, stats,
               [&errands] { errands.request_reload(); });
    const int code = srv.run();
    if (keys) keys->stop();  // before the server's executors go: answers what still waits
    if (envoy_api) envoy_api->shutdown(drain_left(drain, drain_started_ns.load()));
    return code;
  } catch (const floodgate::config_error& e) {
    spdlog::critical("msg=\"invalid configuration\" error={}", quote(e.what()));
  } catch (const std::exception& e) {
    spdlog::critical("msg=\"cannot start\" error={}", quote(e.what()));
  }
  return 1;
}
