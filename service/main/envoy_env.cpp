#include "main/envoy_env.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string_view>

namespace floodgate::service {
namespace {

// How floodgated takes one of upstream's settings (src/settings/settings.go at f2fb157).
enum class takes {
  part,     // read with others below (listeners, Redis, runtime directory, logs)
  flag,     // a boolean: true adds `what`, a flag without a value; false adds nothing
  only,     // accepted when it equals `what` (floodgated behaves so), refused otherwise
  anything  // accepted whatever its value; `why` says what floodgated does instead
};

struct upstream_setting {
  std::string_view name;
  takes how;
  std::string_view what;  // the flag (takes::flag) or the one accepted value (takes::only)
  std::string_view why;   // for takes::only (and refusals) and takes::anything
};

// Upstream's settings that floodgated reads. Any other upstream setting that is set is refused
// (refused_settings below): floodgated never ignores one silently.
constexpr upstream_setting settings[] = {
    {"HOST", takes::part, "", ""},
    {"PORT", takes::part, "", ""},
    {"GRPC_HOST", takes::part, "", ""},
    {"GRPC_PORT", takes::part, "", ""},
    {"DEBUG_HOST", takes::part, "", ""},
    {"DEBUG_PORT", takes::part, "", ""},
    {"REDIS_SOCKET_TYPE", takes::part, "", ""},
    {"REDIS_TYPE", takes::part, "", ""},
    {"REDIS_URL", takes::part, "", ""},
    {"REDIS_AUTH", takes::part, "", ""},
    {"REDIS_TLS", takes::part, "", ""},
    {"REDIS_TLS_CACERT", takes::part, "", ""},
    {"REDIS_TLS_CLIENT_CERT", takes::part, "", ""},
    {"REDIS_TLS_CLIENT_KEY", takes::part, "", ""},
    {"RUNTIME_ROOT", takes::part, "", ""},
    {"RUNTIME_SUBDIRECTORY", takes::part, "", ""},
    {"RUNTIME_APPDIRECTORY", takes::part, "", ""},
    {"LOG_LEVEL", takes::part, "", ""},
    {"LOG_FORMAT", takes::part, "", ""},
    {"SHADOW_MODE", takes::flag, "--envoy-shadow-mode", ""},
    {"LIMIT_RESPONSE_HEADERS_ENABLED", takes::flag, "--envoy-response-headers", ""},
    {"RUNTIME_WATCH_ROOT", takes::anything, "",
     "the config directory and every symlink on the way to it are watched either way"},
    {"LOCAL_CACHE_SIZE_IN_BYTES", takes::anything, "",
     "floodgated always denies locally until a denial's retry_after (exact, bounded at 65536 "
     "entries)"},
    {"NEAR_LIMIT_RATIO", takes::only, "0.8", "floodgated counts near-limit hits beyond 80%"},
    {"MERGE_DOMAIN_CONFIG", takes::only, "false",
     "floodgated refuses a domain defined in two files"},
    {"RUNTIME_IGNOREDOTFILES", takes::only, "false", "floodgated reads every *.yaml file"},
    {"BACKEND_TYPE", takes::only, "redis", "floodgated has no memcache backend"},
    {"USE_STATSD", takes::only, "false",
     "floodgated has no statsd sink: its metrics are on /metrics (Prometheus)"},
    {"USE_DOG_STATSD", takes::only, "false", "floodgated has no statsd sink"},
    {"USE_PROMETHEUS", takes::anything, "", "floodgated always serves /metrics on its HTTP port"},
    {"DISABLE_STATS", takes::only, "false", "floodgated always keeps its metrics"},
    {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", takes::anything, "",
     "floodgated's denied requests never consume"},
    {"GRPC_SERVER_USE_TLS", takes::part, "", ""},
    {"GRPC_SERVER_TLS_CERT", takes::part, "", ""},
    {"GRPC_SERVER_TLS_KEY", takes::part, "", ""},
    {"GRPC_CLIENT_TLS_CACERT", takes::part, "", ""},
    {"TRACING_ENABLED", takes::only, "false", "floodgated has no tracing"},
    {"CONFIG_TYPE", takes::only, "FILE", "floodgated reads configs from files only (no xDS)"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", takes::only, "false",
     "floodgated's health follows the backend and the drain only"},
    {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", takes::only, "false",
     "floodgated verifies the server's name; ?tls_server_name=NAME in --redis names another"},
    {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", takes::anything, "",
     "floodgated's /readyz always follows the backend's connections"},
};

// Upstream settings floodgated does not implement: set, they stop start-up.
constexpr std::string_view refused_settings[] = {"PROTO",
                                                 "GRPC_UDS",
                                                 "GRPC_MAX_CONNECTION_AGE",
                                                 "GRPC_MAX_CONNECTION_AGE_GRACE",
                                                 "GRPC_CLIENT_TLS_SAN",
                                                 "FORCE_START_WITHOUT_INITIAL_CONFIG",
                                                 "CONFIG_GRPC_XDS_NODE_ID",
                                                 "CONFIG_GRPC_XDS_NODE_METADATA",
                                                 "CONFIG_GRPC_XDS_SERVER_URL",
                                                 "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
                                                 "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                                                 "CONFIG_GRPC_XDS_SERVER_USE_TLS",
                                                 "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
                                                 "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
                                                 "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
                                                 "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
                                                 "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
                                                 "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
                                                 "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
                                                 "XDS_CLIENT_BACKOFF_JITTER",
                                                 "USE_DOG_STATSD_MOGRIFIERS",
                                                 "STATSD_HOST",
                                                 "STATSD_PORT",
                                                 "EXTRA_TAGS",
                                                 "STATS_FLUSH_INTERVAL",
                                                 "PROMETHEUS_ADDR",
                                                 "PROMETHEUS_PATH",
                                                 "PROMETHEUS_MAPPER_YAML",
                                                 "EXPIRATION_JITTER_MAX_SECONDS",
                                                 "CACHE_KEY_PREFIX",
                                                 "LIMIT_LIMIT_HEADER",
                                                 "LIMIT_REMAINING_HEADER",
                                                 "LIMIT_RESET_HEADER",
                                                 "REDIS_POOL_SIZE",
                                                 "REDIS_PIPELINE_WINDOW",
                                                 "REDIS_PIPELINE_LIMIT",
                                                 "REDIS_PERSECOND",
                                                 "REDIS_PERSECOND_SOCKET_TYPE",
                                                 "REDIS_PERSECOND_TYPE",
                                                 "REDIS_PERSECOND_URL",
                                                 "REDIS_PERSECOND_POOL_SIZE",
                                                 "REDIS_PERSECOND_AUTH",
                                                 "REDIS_PERSECOND_TLS",
                                                 "REDIS_PERSECOND_PIPELINE_WINDOW",
                                                 "REDIS_PERSECOND_PIPELINE_LIMIT",
                                                 "MEMCACHE_HOST_PORT",
                                                 "MEMCACHE_MAX_IDLE_CONNS",
                                                 "MEMCACHE_SRV",
                                                 "MEMCACHE_SRV_REFRESH",
                                                 "MEMCACHE_TLS",
                                                 "MEMCACHE_TLS_CLIENT_CERT",
                                                 "MEMCACHE_TLS_CLIENT_KEY",
                                                 "MEMCACHE_TLS_CACERT",
                                                 "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
                                                 "TRACING_SERVICE_NAME",
                                                 "TRACING_SERVICE_NAMESPACE",
                                                 "TRACING_SERVICE_INSTANCE_ID",
                                                 "TRACING_EXPORTER_PROTOCOL",
                                                 "TRACING_SAMPLING_RATE"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Go's strconv.ParseBool, which upstream's envconfig uses.
std::optional<bool> parse_bool(std::string_view v) {
  for (auto t : {"1", "t", "T", "TRUE", "true", "True"})
    if (v == t) return true;
  for (auto f : {"0", "f", "F", "FALSE", "false", "False"})
    if (v == f) return false;
  return std::nullopt;
}

// RFC 3986 userinfo: everything but unreserved characters percent-encoded.
std::string percent_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

class reader {
 public:
  explicit reader(const std::function<const char*(const char*)>& getenv) : getenv_(getenv) {}

  // The value when set and not empty (an empty value is unset, as in a Kubernetes manifest).
  std::optional<std::string> get(std::string_view name) const {
    const char* v = getenv_(std::string(name).c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  }
  std::string get_or(std::string_view name, std::string_view fallback) const {
    return get(name).value_or(std::string(fallback));
  }
  bool get_bool(std::string_view name, bool fallback) const {
    const auto v = get(name);
    if (!v) return fallback;
    const auto b = parse_bool(*v);
    if (!b) fail(name, *v, "is not a boolean (true or false)");
    return *b;
  }
  [[noreturn]] static void fail(std::string_view name, std::string_view value,
                                std::string_view why) {
    throw envoy_env_error(std::string(name) + "=" + std::string(value) + ": " + std::string(why));
  }

 private:
  const std::function<const char*(const char*)>& getenv_;
};

std::string listen_address(const reader& env, std::string_view host_var, std::string_view port_var,
                           std::string_view default_port,
                           std::string_view default_host = "0.0.0.0") {
  std::string host = env.get_or(host_var, default_host);
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  const auto port = env.get_or(port_var, default_port);
  if (port.empty() ||
      !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }))
    reader::fail(port_var, port, "is not a port");
  return host + ":" + port;
}

// REDIS_URL and its companions as one --redis URL.
std::string redis_url(const reader& env) {
  const auto url = env.get("REDIS_URL");
  const auto socket = lower(env.get_or("REDIS_SOCKET_TYPE", "tcp"));
  if (socket == "unix" || (url && url->front() == '/'))
    throw envoy_env_error(
        "REDIS_SOCKET_TYPE=unix: floodgated does not reach Redis over a Unix socket yet; use "
        "REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port");
  if (socket != "tcp") reader::fail("REDIS_SOCKET_TYPE", socket, "wants tcp");
  if (!url)
    throw envoy_env_error(
        "REDIS_URL is not set (upstream's default is a Unix socket, which floodgated does not "
        "reach): set REDIS_URL=host:port, or give --redis URL (memory:// for no Redis)");
  if (url->find("://") != std::string::npos)
    reader::fail("REDIS_URL", *url, "wants host:port as upstream reads it (no scheme)");
  const auto type = lower(env.get_or("REDIS_TYPE", "single"));
  const bool tls = env.get_bool("REDIS_TLS", false);
  std::string scheme = tls ? "rediss" : "redis";
  std::string hosts = *url;
  std::string path;
  if (type == "sentinel") {
    // Upstream's form: mastername,host:port[,host:port...]
    const auto comma = url->find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == url->size())
      reader::fail("REDIS_URL", *url, "wants mastername,host:port[,host:port...] for sentinel");
    hosts = url->substr(comma + 1);
    path = "/" + url->substr(0, comma);
    scheme += "+sentinel";
  } else if (type == "cluster") {
    scheme += "+cluster";
  } else if (type != "single") {
    reader::fail("REDIS_TYPE", type, "wants single, sentinel or cluster");
  } else if (url->find(',') != std::string::npos) {
    reader::fail("REDIS_URL", *url, "names several hosts: set REDIS_TYPE=cluster or sentinel");
  }
  std::string userinfo;
  if (const auto auth = env.get("REDIS_AUTH")) {
    // Upstream reads "user:password" as an ACL user, anything else as the password alone.
    const auto colon = auth->find(':');
    userinfo = colon == std::string::npos ? ":" + percent_encode(*auth)
                                          : percent_encode(auth->substr(0, colon)) + ":" +
                                                percent_encode(auth->substr(colon + 1));
    userinfo += "@";
  }
  std::string query;
  constexpr std::pair<std::string_view, std::string_view> tls_files[] = {
      {"REDIS_TLS_CACERT", "tls_ca_file"},
      {"REDIS_TLS_CLIENT_CERT", "tls_cert_file"},
      {"REDIS_TLS_CLIENT_KEY", "tls_key_file"}};
  for (const auto& [name, option] : tls_files) {
    const auto file = env.get(name);
    if (!file) continue;
    if (!tls) reader::fail(name, *file, "applies to TLS only: set REDIS_TLS=true too");
    query += (query.empty() ? "?" : "&") + std::string(option) + "=" + *file;
  }
  return scheme + "://" + userinfo + hosts + path + query;
}

// GRPC_SERVER_USE_TLS and its files as --grpc-tls-cert, --grpc-tls-key and --grpc-tls-ca
// (mutual TLS when GRPC_CLIENT_TLS_CACERT is set, as upstream's RequireAndVerifyClientCert).
void grpc_tls(const reader& env, const std::function<void(std::string_view, std::string)>& add) {
  constexpr std::pair<std::string_view, std::string_view> files[] = {
      {"GRPC_SERVER_TLS_CERT", "--grpc-tls-cert"},
      {"GRPC_SERVER_TLS_KEY", "--grpc-tls-key"},
      {"GRPC_CLIENT_TLS_CACERT", "--grpc-tls-ca"}};
  const bool tls = env.get_bool("GRPC_SERVER_USE_TLS", false);
  for (const auto& [name, flag] : files) {
    const auto file = env.get(name);
    if (file && !tls)
      reader::fail(name, *file, "applies to TLS only: set GRPC_SERVER_USE_TLS=true too");
    if (file) add(flag, *file);
  }
  if (tls && (!env.get("GRPC_SERVER_TLS_CERT") || !env.get("GRPC_SERVER_TLS_KEY")))
    reader::fail("GRPC_SERVER_USE_TLS", "true",
                 "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY (the server's certificate "
                 "chain and key, PEM)");
}

std::string log_level(const reader& env) {
  const auto v = lower(env.get_or("LOG_LEVEL", "warn"));
  if (v == "panic" || v == "fatal") return "critical";
  for (auto known : {"trace", "debug", "info", "warn", "warning", "error"})
    if (v == known) return v;
  reader::fail("LOG_LEVEL", v, "wants trace, debug, info, warn, error, fatal or panic");
}

}  // namespace

envoy_env read_envoy_env(const std::function<const char*(const char*)>& getenv,
                         const std::set<std::string, std::less<>>& given) {
  const reader env(getenv);
  envoy_env result;
  auto& out = result.flags;
  // A flag from the environment unless the command line gives it (read only then: a
  // REDIS_URL missing is no error beside --redis).
  auto add = [&](std::string_view flag, const auto& value) {
    if (!given.contains(flag)) out.emplace_back(std::string(flag), value());
  };
  for (auto name : refused_settings)
    if (const auto v = env.get(name))
      reader::fail(name, *v,
                   "floodgated does not implement this setting of envoyproxy/ratelimit; unset it "
                   "(docs/envoy.md lists what --envoy-env reads)");
  for (const auto& s : settings) {
    const auto v = env.get(s.name);
    if (!v) continue;
    if (s.how == takes::flag && env.get_bool(s.name, false))
      add(s.what, [] { return std::string(); });
    if (s.how == takes::anything)
      result.notes.push_back(std::string(s.name) + "=" + *v + ": " + std::string(s.why));
    if (s.how == takes::only) {
      const bool same =
          parse_bool(s.what) ? parse_bool(*v) == parse_bool(s.what) : lower(*v) == lower(s.what);
      if (!same)
        reader::fail(s.name, *v,
                     "floodgated does not implement it (" + std::string(s.why) + "); only " +
                         std::string(s.what) + " is accepted");
    }
  }
  add("--listen", [&] { return listen_address(env, "HOST", "PORT", "8080"); });
  add("--grpc-listen", [&] { return listen_address(env, "GRPC_HOST", "GRPC_PORT", "8081"); });
  if (env.get("DEBUG_HOST") || env.get("DEBUG_PORT"))
    // Loopback unless DEBUG_HOST says otherwise: floodgated's admin endpoints reset limits and
    // read keys' state, where upstream's debug port only shows stats.
    add("--admin-listen",
        [&] { return listen_address(env, "DEBUG_HOST", "DEBUG_PORT", "6070", "127.0.0.1"); });
  add("--redis", [&] { return redis_url(env); });
  add("--envoy-config", [&] {
    std::string dir = env.get_or("RUNTIME_ROOT", "/srv/runtime_data/current");
    if (const auto sub = env.get("RUNTIME_SUBDIRECTORY")) dir += "/" + *sub;
    return dir + "/" + env.get_or("RUNTIME_APPDIRECTORY", "config");
  });
  add("--envoy-config-watch", [] { return std::string(); });  // upstream always watches
  grpc_tls(env, [&](std::string_view flag, std::string file) { add(flag, [&] { return file; }); });
  add("--log-level", [&] { return log_level(env); });
  if (const auto format = env.get("LOG_FORMAT")) {
    const auto f = lower(*format);
    if (f != "text" && f != "json") reader::fail("LOG_FORMAT", *format, "wants text or json");
    add("--log-format", [&] { return f == "json" ? std::string("json") : std::string("logfmt"); });
  }
  return result;
}

}  // namespace floodgate::service
