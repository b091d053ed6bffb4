// The one way in: every backend is built from a URL here.
#include <chrono>

#include "floodgate/errors.hpp"
#include "floodgate/limiter.hpp"
#include "memory/memory_backend.hpp"

namespace floodgate {

std::chrono::milliseconds system_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
}

std::shared_ptr<backend> make_backend(std::string_view url, const backend_options& options) {
  if (url == "memory://" || url == "memory:" || url == "memory")
    return std::make_shared<memory::memory_backend>(options.memory);
  throw config_error("backend URL '" + std::string(url) +
                     "': unsupported scheme (expected memory:// or redis://host:port)");
}

}  // namespace floodgate
