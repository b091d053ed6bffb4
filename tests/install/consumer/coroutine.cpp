// The coroutine API (floodgate/asio.hpp), built against an installed floodgate: three checks
// co_awaited on an io_context, the last one over the limit of two.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <floodgate/asio.hpp>
#include <floodgate/floodgate.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

int main() {
  floodgate::limiter limiter{"memory://"};
  const floodgate::policy api{"api", floodgate::algorithm::sliding_log, 2, 60s};
  asio::io_context io;
  int admitted = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 3; ++i) {
          auto r = co_await floodgate::async_check(limiter, "alice", api, 1, asio::use_awaitable);
          if (r.decision.allowed)
            ++admitted;
          else
            std::printf("denied, retry in %lld ms\n",
                        static_cast<long long>(r.decision.retry_after.count()));
        }
      },
      asio::detached);
  io.run();
  return admitted == 2 ? 0 : 1;
}
