#include "backend_env.hpp"

#include "floodgate/limiter.hpp"
#include "redis_server.hpp"

namespace floodgate::test {

using namespace std::chrono_literals;

std::shared_ptr<backend> memory_env::make(clock_fn clock) {
  backend_options options;
  options.memory.clock = std::move(clock);
  return make_backend("memory://", options);
}

redis_env::redis_env() = default;
redis_env::~redis_env() = default;

std::shared_ptr<backend> redis_env::make(clock_fn clock) {
  if (!server_) server_ = std::make_unique<redis_server>();
  backend_options options;
  options.redis.test_clock = std::move(clock);
  options.redis.timeout = 2s;  // a loaded CI machine must not turn a decision into a timeout
  return make_backend(server_->url(), options);
}

}  // namespace floodgate::test
