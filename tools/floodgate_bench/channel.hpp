// Messages between the parent and its worker processes over pipes: a type byte, a 64-bit
// length and a payload. The reader is fed bytes (the parent polls many pipes at once).
//
//   worker → parent: ready, progress (decisions so far), result (run_result bytes), failure (text)
//   parent → worker: start (the agreed start instant, µs since the epoch)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate::bench {

enum class frame_type : std::uint8_t { ready = 1, progress, result, failure, start };

struct frame {
  frame_type type{};
  std::string payload;
};

// Writes the whole frame (retrying on EINTR and short writes); false if the reader is gone.
bool write_frame(int fd, frame_type type, std::string_view payload);
// Blocks for one whole frame; std::nullopt on end of file or error.
std::optional<frame> read_frame(int fd);

class frame_reader {
 public:
  static constexpr std::uint64_t max_payload = std::uint64_t{1} << 36;

  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame, if one has arrived. Throws std::runtime_error on a malformed header.
  std::optional<frame> next();
  bool empty() const noexcept { return buffer_.size() == consumed_; }

 private:
  std::string buffer_;
  std::size_t consumed_ = 0;
};

}  // namespace floodgate::bench
