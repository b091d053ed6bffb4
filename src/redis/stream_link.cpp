#include "redis/stream_link.hpp"

#include "redis/endpoint_label.hpp"

namespace floodgate::redis {

stream_link::stream_link(boost::asio::io_context& io, stream_config config, handlers h)
    : config_(std::move(config)), handlers_(std::move(h)), stream_(io, *this) {}

stream_link::~stream_link() {
  close();
}

void stream_link::open() {
  stream_.open(config_);
}

void stream_link::send(std::string_view command) {
  if (!stream_.is_open()) return;
  stream_.out().append(command);
  stream_.flush();
}

void stream_link::close() {
  stream_.close();
}

void stream_link::stream_closed(const std::string& why, std::error_code) {
  handlers_.on_closed(endpoint_label(config_.endpoint) + ": " + why);
}

}  // namespace floodgate::redis
