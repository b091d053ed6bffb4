// A client for a Redis primary found through Sentinel:
// redis+sentinel://[user:password@]host:port[,host:port...]/master-name[/db].
//
//   sentinel_client c{parse_sentinel_url(url), options, scripts};
//   c.submit(std::move(r));   // to the current primary, as client.hpp
//
// The credentials and db are the primary's (the sentinels are asked without AUTH). The
// primary's address comes from SENTINEL get-master-addr-by-name, asked of each sentinel in
// turn; it is asked again every 100 ms, and at once after a call meets READONLY (a demoted
// primary), a lost connection or a timeout. When the address changes, calls go to a new
// client (client.hpp) for it; the old one is kept for twice the call timeout so its calls in
// flight finish, then closed. Polling instead of subscribing to +switch-master keeps this to
// one small thread, and costs nothing in practice: the sentinels themselves learn of a
// promotion through INFO about once a second (docs/operations.md measures what that costs). A READONLY reply means the script wrote nothing (a replica refuses the
// first write), so that call is re-sent once to the new primary when there is time left.
//
// The constructor asks the sentinels once (each within connect_timeout); if none answers,
// calls fail with not_connected until one does. Threading and completion: as client.hpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/scripts.hpp"
#include "redis/transport.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

struct sentinel_config {
  std::vector<redis_endpoint> sentinels;
  std::string master_name;
  redis_endpoint primary;  // user, password and db for the primary; host and port found
};

bool is_sentinel_url(std::string_view url) noexcept;
// Throws config_error (password masked) for a malformed URL.
sentinel_config parse_sentinel_url(std::string_view url);

class sentinel_client final : public transport {
 public:
  sentinel_client(sentinel_config config, const redis_options& options,
                  std::vector<const script*> scripts_to_load);
  ~sentinel_client() override;
  sentinel_client(const sentinel_client&) = delete;
  sentinel_client& operator=(const sentinel_client&) = delete;

  void submit(std::unique_ptr<request> r) override;
  bool healthy() const noexcept override;
  std::string last_error() const override;
  backend_stats stats() const noexcept override;

  class impl;

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace floodgate::redis
