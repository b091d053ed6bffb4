// The one way in: every backend is built from a URL here.
#include <cctype>
#include <chrono>
#include <string>

#include "floodgate/errors.hpp"
#include "floodgate/limiter.hpp"
#include "memory/memory_backend.hpp"
#include "redis/redis_backend.hpp"

namespace floodgate {

std::chrono::milliseconds system_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
}

std::shared_ptr<backend> make_backend(std::string_view url, const backend_options& options) {
  if (url == "memory://" || url == "memory:" || url == "memory")
    return std::make_shared<memory::memory_backend>(options.memory);
  std::string scheme(url.substr(0, url.find("://")));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme == "rediss+sentinel")
    throw config_error("backend URL '" + redis::redact_url(url) +
                       "': TLS through Sentinel is not supported yet (rediss:// and "
                       "rediss+cluster:// are)");
  if (scheme == "redis" || scheme == "rediss" || scheme == "redis+cluster" ||
      scheme == "rediss+cluster" || scheme == "redis+sentinel")
    return std::make_shared<redis::redis_backend>(url, options.redis);
  throw config_error("backend URL '" + redis::redact_url(url) +
                     "': unsupported scheme (expected memory://, redis://host:port redis+cluster://host:port[,...] or redis+sentinel://host:port[,...]/master)");
}

}  // namespace floodgate
