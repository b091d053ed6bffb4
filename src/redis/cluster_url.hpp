// Parses redis+cluster://[user:password@]host:port[,host:port...] into seed endpoints.
//
//   auto seeds =
//   floodgate::redis::parse_cluster_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7000");
//
// Any one reachable seed is enough: the rest of the cluster is discovered with CLUSTER SLOTS.
// The credentials apply to every node, and so does TLS with rediss+cluster:// (a TLS client
// is told the nodes' TLS ports). A database other than 0 is refused (a cluster has
// only db 0). Throws config_error (password masked) for anything else.
#pragma once

#include <string_view>
#include <vector>

#include "redis/url.hpp"

namespace floodgate::redis {

bool is_cluster_url(std::string_view url) noexcept;
std::vector<redis_endpoint> parse_cluster_url(std::string_view url);

}  // namespace floodgate::redis
