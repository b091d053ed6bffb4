// Which topology a Redis URL names, and the options in its query, read in one place for
// everyone who takes a URL (docs/architecture.md), so they never disagree about a URL.
//
//   redis_options o;
//   const topology t = parse_topology("redis+cluster://10.0.0.1:7000?key_prefix=rl:", o);
//   // t.what == topology::kind::cluster, t.nodes: the seeds; o.key_prefix == "rl:"
//
// redis+cluster://[user:password@]host:port[,host:port...] names seeds: any one reachable is
// enough (the rest of the cluster is discovered with CLUSTER SLOTS); the credentials and TLS
// (rediss+cluster://, a TLS client told the nodes' TLS ports) apply to every node, and a
// database other than 0 is refused. redis+sentinel://[user:password@]host[:port][,...]/
// master-name[/db] names sentinels (port 26379 by default), the master, and the primary's
// credentials and db. Throws config_error (password masked) for anything else.
//
// Options in the query string (url_options.cpp; docs/operations.md lists them), e.g.
// redis://127.0.0.1:6379/0?timeout=100ms&connections=4, override the redis_options given in
// code, so a URL alone (floodgated --redis, make_backend) can tune the client. Unknown names,
// repeated names, empty values and bad values are config_errors naming the URL (password
// masked) and the option.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

struct sentinel_config {
  std::vector<redis_endpoint> sentinels;
  std::string master_name;
  redis_endpoint primary;  // user, password and db for the primary; host and port found
};

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

// The topology of a Redis URL: its query's options applied to `options` (apply_url_options),
// then its nodes by scheme (anything but a cluster or sentinel URL is read as redis:// by
// url.hpp). Throws config_error (password masked) for a URL the backend refuses.
topology parse_topology(std::string_view url, redis_options& options);

// The same for a URL given at run time (the inspection API, the rules store): false, with the
// reason in `why_not` ("not a Redis URL: ..." for another scheme), instead of an exception.
bool parse_topology(std::string_view url, redis_options& options, topology& out,
                    std::string& why_not);

// Applies the query string's options (if any) to `options`; returns the URL without it.
std::string_view apply_url_options(std::string_view url, redis_options& options);

bool is_cluster_url(std::string_view url) noexcept;
// The seeds of a redis+cluster:// URL without its query.
std::vector<redis_endpoint> parse_cluster_url(std::string_view url);

bool is_sentinel_url(std::string_view url) noexcept;
// The sentinels and master of a redis+sentinel:// URL without its query.
sentinel_config parse_sentinel_url(std::string_view url);

}  // namespace floodgate::redis
