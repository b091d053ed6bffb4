// What the load is sent to: floodgate's limiter in-process, a naive GET-then-SET limiter on
// Redis, or floodgated over HTTP or Envoy's gRPC API. Each worker thread gets its own target
// from a maker (the library target shares one limiter per process; the others own one
// connection per thread).
//
//   auto make = make_target_maker(opts, policy);   // in the worker process, before threads
//   auto t = make();                               // in each thread
//   t->async_check("user-1", 1, [](answer a) { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/limiter.hpp"
#include "floodgate/policy.hpp"
#include "options.hpp"

namespace floodgate::bench {

struct answer {
  enum class verdict { allowed, denied, error };
  verdict result = verdict::error;
  std::string error;  // what went wrong, for verdict::error
  // The millisecond the deciding clock read, when the target knows it (the library target
  // with --replay gives the backend its clock); -1 otherwise.
  std::int64_t decided_ms = -1;
  bool reserved = false;  // admitted from units this process had reserved (no backend call)
};

using completion = std::function<void(answer)>;

class target {
 public:
  virtual ~target() = default;
  // Decides one request of `cost` (0 peeks) for `key`. `done` runs exactly once, on this
  // thread before the call returns or on another thread; `key` need live only during the call.
  virtual void async_check(std::string_view key, std::int64_t cost, completion done) = 0;
};

using target_maker = std::function<std::unique_ptr<target>()>;

// Throws std::runtime_error (or floodgate::config_error) if the target cannot be set up.
target_maker make_target_maker(const bench_options& opts, const policy& p);

// The library target's limiter (one per process): --redis URL with --connections, --timeout
// and --replay's clock. --algorithm concurrency holds its leases on its backend.
std::shared_ptr<limiter> make_bench_limiter(const bench_options& opts);

// One per kind; make_target_maker picks.
target_maker make_library_target(const bench_options& opts, const policy& p);
target_maker make_naive_target(const bench_options& opts, const policy& p);
target_maker make_http_target(const bench_options& opts);
target_maker make_grpc_target(const bench_options& opts);

}  // namespace floodgate::bench
