// One persistent connection to one sentinel, for the sentinel client (sentinel_client.cpp):
// connect within connect_timeout (TLS when the endpoint says so), AUTH when the options give
// the sentinels a password, then whatever the owner writes; every reply goes to the owner in
// order. It never reconnects by itself and keeps no deadlines beyond connecting's: the owner
// decides (an ask has a deadline, a subscription retries with backoff).
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
#include "redis/url.hpp"

namespace floodgate::redis {

class sentinel_socket {
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
  bool is_open() const noexcept { return session_ != nullptr; }
  const redis_endpoint& endpoint() const noexcept { return endpoint_; }

 private:
  struct session;
  using session_ptr = std::shared_ptr<session>;

  void connected(const session_ptr& s);
  void ready(const session_ptr& s);
  void flush(const session_ptr& s);
  void read(const session_ptr& s);
  void fail(const session_ptr& s, std::string why);

  boost::asio::io_context& io_;
  const redis_endpoint endpoint_;
  const redis_options& options_;
  const std::shared_ptr<boost::asio::ssl::context> tls_;
  const std::string tls_error_;
  handlers handlers_;
  const std::string peer_;
  session_ptr session_;
};

}  // namespace floodgate::redis
