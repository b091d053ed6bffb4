// The README's library example, built against an installed floodgate.
#include <floodgate/floodgate.hpp>

#include <cstdio>

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
  return admitted == 2 ? 0 : 1;
}
