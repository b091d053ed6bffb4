// One persistent connection to one sentinel, for the sentinel client (sentinel_client.cpp): a
// stream (stream.hpp: connect within connect_timeout, TLS when the endpoint says so, AUTH when
// the options give the sentinels a password), then whatever the owner writes; every reply
// goes to the owner in order. It never reconnects by itself and keeps no deadlines beyond
// connecting's: the owner decides (an ask has a deadline, a subscription retries with
// backoff.hpp's policy).
//
//   sentinel_socket s{io, endpoint, options, tls, {on_reply, on_closed}};
//   s.open();                                    // AUTH is sent first when configured
//   s.send(command);                             // queued until connected
//   s.close();                                   // no handler runs after it
//
// Internal and Asio-based; everything runs on the sentinel client's io thread: no locks.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/options.hpp"
#include "redis/reply.hpp"
#include "redis/stream.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

class sentinel_socket final : private stream_owner {
 public:
  struct handlers {
    std::function<void(reply&)> on_reply;               // a reply, AUTH's excepted
    std::function<void(const std::string&)> on_closed;  // why; the socket is closed already
  };

  // `tls` is used when endpoint.tls; null there makes every open fail (the reason given).
  // `peer` names the other end in messages ("closed by the sentinel"; node_asker.hpp also
  // asks servers).
  sentinel_socket(boost::asio::io_context& io, redis_endpoint endpoint,
                  const redis_options& options, std::shared_ptr<boost::asio::ssl::context> tls,
                  std::string tls_error, handlers h, std::string peer = "the sentinel");
  ~sentinel_socket();
  sentinel_socket(const sentinel_socket&) = delete;
  sentinel_socket& operator=(const sentinel_socket&) = delete;

  // Starts connecting, closing any connection it had first.
  void open();
  // Appends an encoded command; written once connected (open() must have been called).
  void send(std::string_view command);
  // Closes the connection, silently.
  void close();
  bool is_open() const noexcept { return stream_.is_open(); }
  const redis_endpoint& endpoint() const noexcept { return config_.endpoint; }

 private:
  void stream_ready() override {}
  void stream_reply(reply& r) override { handlers_.on_reply(r); }
  void stream_closed(const std::string& why, std::error_code ec) override;

  const redis_options& options_;  // read at each open(): connect_timeout may change
  stream_config config_;
  handlers handlers_;
  stream stream_;
};

}  // namespace floodgate::redis
