// A redis-server that also serves TLS on a free port (client certificates required), with its
// certificates: the start of every test of a rediss:// reader.
//
//   tls_redis r;
//   floodgate::limiter l{r.url(r.certs.client_query())};   // rediss://127.0.0.1:T?...
#pragma once

#include <cstdint>
#include <string>

#include "redis_server.hpp"
#include "tls_certificates.hpp"

namespace floodgate::test {

struct tls_redis {
  tls_certificates certs;
  std::uint16_t tls_port = free_port();
  redis_server redis{with_tls(certs, tls_port)};

  // rediss://127.0.0.1:<tls_port>?<query>
  std::string url(const std::string& query) const {
    return "rediss://127.0.0.1:" + std::to_string(tls_port) + "?" + query;
  }

 private:
  static redis_server::options with_tls(const tls_certificates& c, std::uint16_t port) {
    redis_server::options o;
    o.extra_args = c.server_args(port);
    return o;
  }
};

}  // namespace floodgate::test
