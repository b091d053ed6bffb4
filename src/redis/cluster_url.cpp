#include "redis/cluster_url.hpp"

#include <string>

#include "floodgate/errors.hpp"

namespace floodgate::redis {
namespace {

constexpr std::string_view plain_scheme = "redis+cluster://";
constexpr std::string_view tls_scheme = "rediss+cluster://";

}  // namespace

bool is_cluster_url(std::string_view url) noexcept {
  return iequals_prefix(url, plain_scheme) || iequals_prefix(url, tls_scheme);
}

std::vector<redis_endpoint> parse_cluster_url(std::string_view url) {
  auto fail = [&](const std::string& why) -> std::vector<redis_endpoint> {
    throw config_error("redis+cluster URL '" + redact_url(url) + "': " + why);
  };
  if (!is_cluster_url(url))
    return fail("expected redis+cluster://[user:password@]host:port[,...] (or rediss+cluster://)");
  const bool tls = iequals_prefix(url, tls_scheme);
  std::string_view rest = url.substr(tls ? tls_scheme.size() : plain_scheme.size());
  std::string_view userinfo;
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = rest.substr(0, at + 1);  // with the '@'
    rest = rest.substr(at + 1);
  }
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    const auto db = rest.substr(slash + 1);
    if (!db.empty() && db != "0") return fail("a cluster has only database 0");
    rest = rest.substr(0, slash);
  }
  std::vector<redis_endpoint> seeds;
  while (true) {
    const auto comma = rest.find(',');
    const auto hostport = rest.substr(0, comma);
    if (hostport.empty()) return fail("empty host in the seed list");
    try {
      seeds.push_back(parse_redis_url((tls ? "rediss://" : "redis://") + std::string(userinfo) +
                                      std::string(hostport)));
    } catch (const config_error& e) {
      // The inner message names "redis://...": say which seed, without the password.
      const std::string what = e.what();
      return fail("seed '" + std::string(hostport) + "': " + what.substr(what.find("': ") + 3));
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return seeds;
}

}  // namespace floodgate::redis
