#include "redis/sentinel_socket.hpp"

#include "redis/endpoint_label.hpp"

namespace floodgate::redis {

sentinel_socket::sentinel_socket(boost::asio::io_context& io, redis_endpoint endpoint,
                                 const redis_options& options,
                                 std::shared_ptr<boost::asio::ssl::context> tls,
                                 std::string tls_error, handlers h, std::string peer)
    : options_(options), handlers_(std::move(h)), stream_(io, *this) {
  config_.endpoint = std::move(endpoint);
  config_.tls = options.tls;
  config_.tls_context = {std::move(tls), std::move(tls_error)};
  config_.peer = std::move(peer);
}

sentinel_socket::~sentinel_socket() {
  close();
}

void sentinel_socket::open() {
  config_.greeting.user = options_.sentinel_user;
  config_.greeting.password = options_.sentinel_password;
  config_.connect_timeout = options_.connect_timeout;
  config_.max_reply_size = options_.max_reply_size;
  stream_.open(config_);
}

void sentinel_socket::send(std::string_view command) {
  if (!stream_.is_open()) return;
  stream_.out().append(command);
  stream_.flush();
}

void sentinel_socket::close() {
  stream_.close();
}

void sentinel_socket::stream_closed(const std::string& why, std::error_code) {
  handlers_.on_closed(endpoint_label(config_.endpoint) + ": " + why);
}

}  // namespace floodgate::redis
