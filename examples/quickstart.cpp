// A tour of the library: a few checks per algorithm, printed as they are decided.
//
//   floodgate_example                          # in-process memory backend
//   floodgate_example redis://127.0.0.1:6379   # a shared Redis
#include <floodgate/floodgate.hpp>

#include <cstdio>
#include <exception>

using namespace std::chrono_literals;

int main(int argc, char** argv) try {
  const char* url = argc > 1 ? argv[1] : "memory://";
  floodgate::limiter limiter{url};

  const floodgate::policy policies[] = {
      {"demo-log", floodgate::algorithm::sliding_log, 5, 10s},
      {"demo-window", floodgate::algorithm::sliding_window, 5, 10s},
      {"demo-fixed", floodgate::algorithm::fixed_window, 5, 10s},
      {"demo-bucket", floodgate::algorithm::token_bucket, 5, 10s, /*burst=*/3},
      {"demo-gcra", floodgate::algorithm::gcra, 5, 10s, /*burst=*/3},
  };
  std::printf("backend: %s (%s)\n", url, std::string(limiter.get_backend().kind()).c_str());
  for (const auto& p : policies) {
    limiter.reset("alice", p);
    std::printf("\n%s: %s, limit %lld per %llds\n", p.name().c_str(),
                std::string(floodgate::to_string(p.algo())).c_str(),
                static_cast<long long>(p.limit()),
                static_cast<long long>(p.window().count() / 1000));
    for (int i = 1; i <= 7; ++i) {
      const auto r = limiter.check("alice", p);
      const auto& d = r.decision;
      std::printf("  request %d: %-13s remaining=%lld reset_after=%lldms retry_after=%lldms%s\n",
                  i, floodgate::to_string(r.outcome), static_cast<long long>(d.remaining),
                  static_cast<long long>(d.reset_after.count()),
                  static_cast<long long>(d.retry_after.count()),
                  r.error ? (" (" + r.error.message() + ")").c_str() : "");
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "floodgate_example: %s\n", e.what());
  return 2;
}
