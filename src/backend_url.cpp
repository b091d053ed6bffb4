// The one way in: every backend is built from a URL here.
#include <chrono>
#include <string>

#include "floodgate/errors.hpp"
#include "floodgate/limiter.hpp"
#include "memory/memory_backend.hpp"
#include "redis/redis_backend.hpp"
#include "redis/topology.hpp"

namespace floodgate {

std::chrono::milliseconds system_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
}

namespace {

// memory://?max_keys=N: the only option of the memory backend.
memory_options memory_url_options(std::string_view url, memory_options o) {
  const auto question = url.find('?');
  if (question == std::string_view::npos) return o;
  const std::string_view query = url.substr(question + 1);
  constexpr std::string_view name = "max_keys=";
  const auto n =
      redis::parse_number<std::size_t>(query.substr(std::min(query.size(), name.size())));
  if (!query.starts_with(name) || !n || *n < 1)
    throw config_error("backend URL '" + std::string(url) +
                       "': the memory backend takes one option, max_keys=N with N >= 1");
  o.max_keys = *n;
  return o;
}

}  // namespace

std::shared_ptr<backend> make_backend(std::string_view url, const backend_options& options) {
  const std::string_view base = url.substr(0, url.find('?'));
  if (base == "memory://" || base == "memory:" || base == "memory")
    return std::make_shared<memory::memory_backend>(memory_url_options(url, options.memory));
  if (redis::is_redis_url(url)) return std::make_shared<redis::redis_backend>(url, options.redis);
  throw config_error("backend URL '" + redis::redact_url(url) +
                     "': unsupported scheme (expected memory://, redis://host:port redis+cluster://host:port[,...] or redis+sentinel://host:port[,...]/master)");
}

}  // namespace floodgate
