// The library target: floodgate::limiter, through make_backend(url) like any library user.
#include "floodgate/limiter.hpp"
#include "target.hpp"

namespace floodgate::bench {
namespace {

class library_target final : public target {
 public:
  library_target(std::shared_ptr<limiter> l, const policy& p)
      : limiter_(std::move(l)), policy_(p) {}

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    limiter_->async_check(key, policy_, cost, [done = std::move(done)](check_result r) {
      switch (r.outcome) {
        case outcome::allowed:
          done({answer::verdict::allowed, {}});
          break;
        case outcome::over_limit:
          done({answer::verdict::denied, {}});
          break;
        case outcome::backend_error:
        case outcome::invalid_request:
          done({answer::verdict::error, r.error.message()});
          break;
      }
    });
  }

 private:
  std::shared_ptr<limiter> limiter_;
  const policy& policy_;
};

}  // namespace

target_maker make_library_target(const bench_options& opts, const policy& p) {
  backend_options b;
  b.redis.connections = opts.connections;
  b.redis.timeout = opts.timeout;
  auto shared = std::make_shared<limiter>(opts.url, b);
  return [shared, &p] { return std::make_unique<library_target>(shared, p); };
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
