// Real nginx for a test, running examples/nginx.conf with its ports swapped for free ones:
// the proxy (8000 in the example), floodgated (8080) and the stand-in app (9000, whose access
// log tells which requests reached the app).
//
//   nginx_process nginx(fg.port());
//   http_request_once(nginx.port(), "GET", "/api/x", {}, {{"X-Api-Key", "alice"}});
//   nginx.app_hits(1);   // requests the app saw
#pragma once

#include <cstdint>
#include <string>

#include "child_process.hpp"

namespace floodgate::test {

class nginx_process {
 public:
  explicit nginx_process(std::uint16_t floodgated_port);
  ~nginx_process();  // stops nginx (SIGTERM, then SIGKILL), removes the prefix dir
  nginx_process(const nginx_process&) = delete;
  nginx_process& operator=(const nginx_process&) = delete;

  std::uint16_t port() const { return port_; }  // the proxy clients talk to
  // Lines in the app's access log. nginx writes a line after its response, so this waits up
  // to 2 s for `expected` lines, then 100 ms more for any extra ones.
  std::size_t app_hits(std::size_t expected) const;
  std::string error_log() const;

 private:
  void start(std::uint16_t floodgated_port);

  std::string dir_;
  child_process process_;
  std::uint16_t port_ = 0;
};

}  // namespace floodgate::test
