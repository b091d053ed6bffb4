// Options in a Redis URL's query string, so a URL alone (floodgated --redis, make_backend)
// can tune the client:
//
//   redis://127.0.0.1:6379/0?timeout=100ms&connections=4
//   redis+cluster://10.0.0.1:7000,10.0.0.2:7000?timeout=200ms&key_prefix=rl:
//
//   timeout          a call's deadline (redis_options::timeout), e.g. 50ms, 1s
//   connect_timeout  connect + handshake deadline (redis_options::connect_timeout)
//   connections      connections per server, 1..1024 (redis_options::connections)
//   key_prefix       prepended to every key: letters, digits and _ - . : only
//   breaker_failures, breaker_open_for   a Cluster node's circuit breaker (redis_options)
//   sentinel_user, sentinel_password     the sentinels' own credentials (masked in messages)
//   tls_ca_file, tls_cert_file, tls_key_file, tls_server_name, tls_verify=yes|no
//                    redis_options::tls, for rediss:// (paths as they are: no %-escapes)
//
// A URL's options override the redis_options given in code. Unknown names, repeated names,
// empty values and bad values are config_errors naming the URL (password masked) and the option.
#pragma once

#include <string_view>

#include "floodgate/options.hpp"

namespace floodgate::redis {

// Applies the query string's options (if any) to `options`; returns the URL without it.
std::string_view apply_url_options(std::string_view url, redis_options& options);

}  // namespace floodgate::redis
