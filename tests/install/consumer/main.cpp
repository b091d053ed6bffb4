// The README's library example, built against an installed floodgate: the sync call, then the
// callback it waits on (docs/library.md), and the inspection API's header and symbols.
#include <floodgate/floodgate.hpp>
#include <floodgate/inspect.hpp>

#include <cstdio>
#include <future>

int main() {
  using namespace std::chrono_literals;
  floodgate::limiter limiter{"memory://"};
  floodgate::policy api{"api", floodgate::algorithm::sliding_log, 2, 60s};
  int admitted = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = limiter.check("alice", api);
    if (r.decision.allowed) ++admitted;
    else std::printf("denied, retry in %lld ms\n", static_cast<long long>(r.decision.retry_after.count()));
  }

  // The callback runs exactly once: on floodgate's I/O thread, or before async_check returns
  // (the memory backend, invalid requests). It must not block.
  std::promise<floodgate::outcome> answered;
  limiter.async_check("bob", api, 1, [&answered](floodgate::check_result r) {
    answered.set_value(r.outcome);
  });
  if (answered.get_future().get() == floodgate::outcome::allowed) ++admitted;

  // The inspection API is installed and links: memory:// keeps its state in the process.
  floodgate::redis_inspector inspector{"memory://"};
  if (inspector.names_redis() || inspector.read_state(api, "alice").readable) return 1;
  return admitted == 3 ? 0 : 1;
}
