// Which topology a Redis URL names, read in one place for everyone who takes a URL: the
// backend (redis_backend.cpp), make_backend's scheme check (backend_url.cpp) and the inspection
// API (inspect.cpp), so they never disagree about a URL.
//
//   redis_options o;
//   const topology t = parse_topology("redis+cluster://10.0.0.1:7000?key_prefix=rl:", o);
//   // t.what == topology::kind::cluster, t.nodes: the seeds; o.key_prefix == "rl:"
#pragma once

#include <string_view>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/sentinel_client.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

struct topology {
  enum class kind { single, cluster, sentinel } what = kind::single;
  std::vector<redis_endpoint> nodes;  // single: its node; cluster: the seeds; sentinel: none
  sentinel_config sentinel;           // sentinel only: the sentinels, the master's name

  // rediss*: the nodes are asked over TLS.
  bool tls() const noexcept {
    return what == kind::sentinel ? sentinel.primary.tls : nodes.front().tls;
  }
};

// Whether the URL's scheme (before "://", any case) is one the Redis backend takes: redis,
// rediss, redis+cluster, rediss+cluster, redis+sentinel, rediss+sentinel.
bool is_redis_url(std::string_view url) noexcept;

// The topology of a Redis URL: its query's options applied to `options` (url_options.hpp),
// then its nodes by scheme (cluster_url.hpp, sentinel_client.hpp; anything else is read as
// redis:// by url.hpp). Throws config_error (password masked) for a URL the backend refuses.
topology parse_topology(std::string_view url, redis_options& options);

}  // namespace floodgate::redis
