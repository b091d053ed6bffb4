// The library target: floodgate::limiter, through make_backend(url) like any library user.
//
// With --replay it also learns the millisecond each decision was made at: the backend gets a
// clock (memory_options::clock, or redis_options::test_clock, so Redis's scripts take "now"
// as an argument) that is this host's clock, and writes what it read into the call's cell;
// so does the limiter (limiter_options::clock), for what it answers without the backend.
// Both backends read it on the calling thread inside async_check (the memory backend decides
// there; the Redis backend encodes the call there), so a thread-local pointer finds the cell;
// the cell travels to the completion, which may run on another thread.
#include <memory>

#include "floodgate/limiter.hpp"
#include "target.hpp"

namespace floodgate::bench {
namespace {

thread_local std::int64_t* decision_cell = nullptr;

std::chrono::milliseconds recording_clock() {
  const auto t = system_now();
  if (decision_cell) *decision_cell = t.count();
  return t;
}

class library_target final : public target {
 public:
  library_target(std::shared_ptr<limiter> l, const policy& p, bool record_time)
      : limiter_(std::move(l)), policy_(p), record_time_(record_time) {}

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    std::shared_ptr<std::int64_t> cell;
    std::int64_t* const outer = decision_cell;  // a completion may issue the next call inline
    if (record_time_) {
      // The last read wins: the backend's "now" comes after the limiter's own reads.
      cell = std::make_shared<std::int64_t>(-1);
      decision_cell = cell.get();
    }
    limiter_->async_check(key, policy_, cost, [done = std::move(done), cell](check_result r) {
      const std::int64_t at = cell ? *cell : -1;
      switch (r.outcome) {
        case outcome::allowed:
          done({answer::verdict::allowed, {}, at, r.reserved});
          break;
        case outcome::over_limit:
          done({answer::verdict::denied, {}, at});
          break;
        case outcome::backend_error:
        case outcome::invalid_request:
          done({answer::verdict::error, r.error.message()});
          break;
      }
    });
    // Clock reads outside a call (heartbeats, other calls' completions) write nowhere.
    decision_cell = outer;
  }

 private:
  std::shared_ptr<limiter> limiter_;
  const policy& policy_;
  bool record_time_;
};

}  // namespace

std::shared_ptr<limiter> make_bench_limiter(const bench_options& opts) {
  backend_options b;
  b.redis.connections = opts.connections;
  b.redis.timeout = opts.timeout;
  limiter_options l;
  if (opts.replay) {
    b.memory.clock = recording_clock;
    b.redis.test_clock = recording_clock;
    // Decisions the limiter answers itself (from reserved units, or a local denial) are
    // decided on its clock: the same one, so they are recorded too.
    l.clock = recording_clock;
  }
  return std::make_shared<limiter>(opts.url, b, l);
}

target_maker make_library_target(const bench_options& opts, const policy& p) {
  auto shared = make_bench_limiter(opts);
  return [shared, &p, record = opts.replay] {
    return std::make_unique<library_target>(shared, p, record);
  };
}

target_maker make_target_maker(const bench_options& opts, const policy& p) {
  switch (opts.target) {
    case target_kind::library:
      return make_library_target(opts, p);
    case target_kind::naive:
      return make_naive_target(opts, p);
    case target_kind::http:
      return make_http_target(opts);
    case target_kind::grpc:
      return make_grpc_target(opts);
  }
  return {};
}

}  // namespace floodgate::bench
