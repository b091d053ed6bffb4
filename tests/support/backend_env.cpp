#include "backend_env.hpp"

#include "floodgate/limiter.hpp"

namespace floodgate::test {

std::shared_ptr<backend> memory_env::make(clock_fn clock) {
  backend_options options;
  options.memory.clock = std::move(clock);
  return make_backend("memory://", options);
}

}  // namespace floodgate::test
