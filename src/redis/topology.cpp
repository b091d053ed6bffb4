#include "redis/topology.hpp"

#include <array>
#include <string>

#include "redis/cluster_url.hpp"
#include "redis/url_options.hpp"

namespace floodgate::redis {

bool is_redis_url(std::string_view url) noexcept {
  constexpr std::array<std::string_view, 6> schemes = {
      "redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"};
  const auto scheme = url.substr(0, url.find("://"));
  for (const auto s : schemes)
    if (scheme.size() == s.size() && iequals_prefix(scheme, s)) return true;
  return false;
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

}  // namespace floodgate::redis
