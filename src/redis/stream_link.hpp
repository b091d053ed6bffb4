// A stream (stream.hpp) whose replies and closing go to callbacks, for the sockets that are not
// a client's pipelined connections: the Sentinel client's two per sentinel (questions, and the
// subscription) and the inspection API's questions (node_asker.hpp). It never reconnects by
// itself and keeps no deadlines beyond connecting's: the owner decides (an ask has a deadline,
// a subscription retries with backoff.hpp's policy).
//
//   stream_link s{io, sentinel_stream_config(ep, options, tls), {on_reply, on_closed}};
//   s.open();                                    // AUTH is sent first when configured
//   s.send(command);                             // queued until connected
//   s.close();                                   // no handler runs after it
//
// Internal and Asio-based; everything runs on the owner's io thread: no locks.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <string>
#include <string_view>

#include "floodgate/options.hpp"
#include "redis/reply.hpp"
#include "redis/stream.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

class stream_link final : private stream_owner {
 public:
  struct handlers {
    std::function<void(reply&)> on_reply;               // a reply, the greeting's excepted
    std::function<void(const std::string&)> on_closed;  // why, with the endpoint; closed already
  };

  stream_link(boost::asio::io_context& io, stream_config config, handlers h);
  ~stream_link();
  stream_link(const stream_link&) = delete;
  stream_link& operator=(const stream_link&) = delete;

  // Starts connecting with config(), closing any connection it had first.
  void open();
  // Appends an encoded command; written once connected (open() must have been called).
  void send(std::string_view command);
  // Closes the connection, silently.
  void close();
  bool is_open() const noexcept { return stream_.is_open(); }
  const redis_endpoint& endpoint() const noexcept { return config_.endpoint; }
  // Read at each open().
  stream_config& config() noexcept { return config_; }

 private:
  void stream_ready() override {}
  void stream_reply(reply& r) override { handlers_.on_reply(r); }
  void stream_closed(const std::string& why, std::error_code ec) override;

  stream_config config_;
  handlers handlers_;
  stream stream_;
};

}  // namespace floodgate::redis
