#include "redis/topology.hpp"

#include <array>
#include <cctype>
#include <optional>
#include <string>

#include "floodgate/errors.hpp"

namespace floodgate::redis {
namespace {

constexpr std::string_view cluster_scheme = "redis+cluster://";
constexpr std::string_view cluster_tls_scheme = "rediss+cluster://";
constexpr std::string_view sentinel_scheme = "redis+sentinel://";
constexpr std::string_view sentinel_tls_scheme = "rediss+sentinel://";

// What cluster and sentinel URLs share, its scheme checked already:
// scheme://[userinfo@]host[:port][,...][/path].
struct host_list_url {
  std::string_view userinfo;  // with its '@', or empty
  std::vector<std::string_view> hosts;
  std::optional<std::string_view> path;  // after the '/' behind the hosts
};

host_list_url split(std::string_view url) {
  host_list_url out;
  std::string_view rest = url.substr(url.find("://") + 3);
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    out.userinfo = rest.substr(0, at + 1);
    rest = rest.substr(at + 1);
  }
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    out.path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  for (;;) {
    const auto comma = rest.find(',');
    out.hosts.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    rest = rest.substr(comma + 1);
  }
}

// An inner redis:// URL's error without its "redis URL '...': " (it would name that URL).
std::string reason(const config_error& e) {
  const std::string what = e.what();
  return what.substr(what.find("': ") + 3);
}

}  // namespace

bool is_redis_url(std::string_view url) noexcept {
  constexpr std::array<std::string_view, 6> schemes = {
      "redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"};
  const auto scheme = url.substr(0, url.find("://"));
  for (const auto s : schemes)
    if (scheme.size() == s.size() && iequals_prefix(scheme, s)) return true;
  return false;
}

bool parse_topology(std::string_view url, redis_options& options, topology& out,
                    std::string& why_not) {
  if (!is_redis_url(url)) {
    why_not = "not a Redis URL: " + redact_url(url);
    return false;
  }
  try {
    out = parse_topology(url, options);
    return true;
  } catch (const std::exception& e) {
    why_not = e.what();
    return false;
  }
}

topology parse_topology(std::string_view url, redis_options& options) {
  const std::string_view base = apply_url_options(url, options);
  topology t;
  if (is_cluster_url(base)) {
    t.what = topology::kind::cluster;
    t.nodes = parse_cluster_url(base);
  } else if (is_sentinel_url(base)) {
    t.what = topology::kind::sentinel;
    t.sentinel = parse_sentinel_url(base);
  } else {
    t.nodes.push_back(parse_redis_url(base));
  }
  return t;
}

bool is_cluster_url(std::string_view url) noexcept {
  return iequals_prefix(url, cluster_scheme) || iequals_prefix(url, cluster_tls_scheme);
}

std::vector<redis_endpoint> parse_cluster_url(std::string_view url) {
  auto fail = [&](const std::string& why) -> std::vector<redis_endpoint> {
    throw config_error("redis+cluster URL '" + redact_url(url) + "': " + why);
  };
  if (!is_cluster_url(url))
    return fail("expected redis+cluster://[user:password@]host:port[,...] (or rediss+cluster://)");
  const bool tls = iequals_prefix(url, cluster_tls_scheme);
  const auto parts = split(url);
  if (parts.path && !parts.path->empty() && *parts.path != "0")
    return fail("a cluster has only database 0");
  std::vector<redis_endpoint> seeds;
  for (const auto hostport : parts.hosts) {
    if (hostport.empty()) return fail("empty host in the seed list");
    try {
      seeds.push_back(parse_redis_url((tls ? "rediss://" : "redis://") +
                                      std::string(parts.userinfo) + std::string(hostport)));
    } catch (const config_error& e) {
      // Which seed, without the password.
      return fail("seed '" + std::string(hostport) + "': " + reason(e));
    }
  }
  return seeds;
}

bool is_sentinel_url(std::string_view url) noexcept {
  return iequals_prefix(url, sentinel_scheme) || iequals_prefix(url, sentinel_tls_scheme);
}

sentinel_config parse_sentinel_url(std::string_view url) {
  auto fail = [&](const std::string& why) -> sentinel_config {
    throw config_error("redis+sentinel URL '" + redact_url(url) + "': " + why);
  };
  if (!is_sentinel_url(url))
    return fail(
        "expected redis+sentinel://[user:password@]host:port[,...]/master-name[/db] (or "
        "rediss+sentinel://)");
  const bool tls = iequals_prefix(url, sentinel_tls_scheme);
  const auto parts = split(url);
  if (!parts.path) return fail("missing /master-name");
  const auto db_slash = parts.path->find('/');
  sentinel_config out;
  out.master_name = std::string(parts.path->substr(0, db_slash));
  if (out.master_name.empty()) return fail("missing /master-name");
  for (char c : out.master_name)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '?' || c == '#')
      return fail("invalid character in master name");
  try {
    // The primary's credentials and db, parsed as a redis:// URL on a placeholder host.
    const std::string db = db_slash == std::string_view::npos
                               ? std::string()
                               : "/" + std::string(parts.path->substr(db_slash + 1));
    out.primary = parse_redis_url("redis://" + std::string(parts.userinfo) + "primary" + db);
    out.primary.tls = tls;
    for (const auto hostport : parts.hosts) {
      if (hostport.empty()) return fail("empty host in the sentinel list");
      auto ep = parse_redis_url("redis://" + std::string(hostport));
      ep.port = hostport.find(':') == std::string_view::npos ? 26379 : ep.port;
      ep.tls = tls;
      out.sentinels.push_back(std::move(ep));
    }
  } catch (const config_error& e) {
    return fail(reason(e));
  }
  return out;
}

}  // namespace floodgate::redis
