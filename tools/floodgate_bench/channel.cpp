#include "channel.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace floodgate::bench {
namespace {

constexpr std::size_t header_size = 1 + sizeof(std::uint64_t);

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const auto w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, char* data, std::size_t n) {
  while (n > 0) {
    const auto r = ::read(fd, data, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

bool write_frame(int fd, frame_type type, std::string_view payload) {
  char header[header_size];
  header[0] = static_cast<char>(type);
  const std::uint64_t length = payload.size();
  std::memcpy(header + 1, &length, sizeof length);
  return write_all(fd, header, sizeof header) && write_all(fd, payload.data(), payload.size());
}

std::optional<frame> read_frame(int fd) {
  char header[header_size];
  if (!read_all(fd, header, sizeof header)) return std::nullopt;
  std::uint64_t length = 0;
  std::memcpy(&length, header + 1, sizeof length);
  if (length > frame_reader::max_payload) return std::nullopt;
  frame f{static_cast<frame_type>(header[0]), std::string(length, '\0')};
  if (!read_all(fd, f.payload.data(), length)) return std::nullopt;
  return f;
}

std::optional<frame> frame_reader::next() {
  const std::string_view rest = std::string_view(buffer_).substr(consumed_);
  if (rest.size() < header_size) return std::nullopt;
  const auto type = static_cast<std::uint8_t>(rest[0]);
  if (type < static_cast<std::uint8_t>(frame_type::ready) ||
      type > static_cast<std::uint8_t>(frame_type::start))
    throw std::runtime_error("worker pipe: bad frame type " + std::to_string(type));
  std::uint64_t length = 0;
  std::memcpy(&length, rest.data() + 1, sizeof length);
  if (length > max_payload) throw std::runtime_error("worker pipe: frame too large");
  if (rest.size() - header_size < length) return std::nullopt;
  frame f{static_cast<frame_type>(type), std::string(rest.substr(header_size, length))};
  consumed_ += header_size + length;
  // Compact once the consumed part dominates, so a long run does not keep every byte.
  if (consumed_ > buffer_.size() / 2) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return f;
}

}  // namespace floodgate::bench
