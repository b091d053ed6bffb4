// The naive limiter: the fixed window most people write first, GET the count, compare, SET
// the count + cost. Two round trips and no atomicity, so concurrent callers read the same
// count and all admit: the read-modify-write race floodgate's single Lua script closes. It
// uses hiredis directly (one blocking connection per thread) and is not floodgate.
#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "endpoint.hpp"
#include "floodgate/options.hpp"
#include "target.hpp"

namespace floodgate::bench {
namespace {

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

class naive_target final : public target {
 public:
  naive_target(endpoint e, const policy& p, std::chrono::milliseconds timeout)
      : endpoint_(std::move(e)),
        limit_(p.limit()),
        window_ms_(p.window().count()),
        timeout_{static_cast<long>(timeout.count() / 1000),
                 static_cast<long>(timeout.count() % 1000 * 1000)} {}

  void async_check(std::string_view key, std::int64_t cost, completion done) override {
    std::string error;
    if (!connected(error)) return done({answer::verdict::error, std::move(error)});

    // The window is read off this host's clock: the naive limiter has no better one.
    const auto now = system_now().count();
    const std::string state_key =
        "naive:{" + std::string(key) + "}:" + std::to_string(now / window_ms_);
    reply_ptr got(static_cast<redisReply*>(
        redisCommand(context_.get(), "GET %b", state_key.data(), state_key.size())));
    if (!got || got->type == REDIS_REPLY_ERROR) return fail(got.get(), done);
    const long long count = got->type == REDIS_REPLY_STRING ? std::stoll(got->str) : 0;
    if (count + cost > limit_) return done({answer::verdict::denied, {}});
    if (cost == 0) return done({answer::verdict::allowed, {}});

    const std::string next = std::to_string(count + cost);
    reply_ptr set(static_cast<redisReply*>(
        redisCommand(context_.get(), "SET %b %b PX %lld", state_key.data(), state_key.size(),
                     next.data(), next.size(), static_cast<long long>(window_ms_))));
    if (!set || set->type == REDIS_REPLY_ERROR) return fail(set.get(), done);
    done({answer::verdict::allowed, {}});
  }

 private:
  bool connected(std::string& error) {
    if (context_ && !context_->err) return true;
    context_.reset(redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, timeout_));
    if (!context_ || context_->err) {
      error = "naive: connect " + endpoint_.label() + ": " +
              (context_ ? context_->errstr : "out of memory");
      context_.reset();
      return false;
    }
    redisSetTimeout(context_.get(), timeout_);
    if (!endpoint_.password.empty()) {
      auto auth = endpoint_.user.empty()
                      ? std::vector<std::string>{"AUTH", endpoint_.password}
                      : std::vector<std::string>{"AUTH", endpoint_.user, endpoint_.password};
      if (!command_ok(auth, error)) return false;
    }
    if (endpoint_.db != 0 && !command_ok({"SELECT", std::to_string(endpoint_.db)}, error))
      return false;
    return true;
  }

  bool command_ok(const std::vector<std::string>& args, std::string& error) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    reply_ptr r(static_cast<redisReply*>(
        redisCommandArgv(context_.get(), static_cast<int>(args.size()), argv.data(), lens.data())));
    if (r && r->type != REDIS_REPLY_ERROR) return true;
    error = "naive: " + args[0] + ": " + (r ? r->str : context_->errstr);
    context_.reset();
    return false;
  }

  void fail(const redisReply* r, completion& done) {
    std::string error =
        r ? std::string("naive: ") + r->str : std::string("naive: ") + context_->errstr;
    if (!r) context_.reset();  // a broken connection: reconnect on the next call
    done({answer::verdict::error, std::move(error)});
  }

  endpoint endpoint_;
  std::int64_t limit_;
  std::int64_t window_ms_;
  timeval timeout_;
  context_ptr context_;
};

}  // namespace

target_maker make_naive_target(const bench_options& opts, const policy& p) {
  auto e = parse_endpoint(opts.url, "redis");
  if (!e) throw std::runtime_error("--naive: cannot read host:port in '" + opts.url + "'");
  return [e = *e, &p, timeout = opts.timeout] {
    return std::make_unique<naive_target>(e, p, timeout);
  };
}

}  // namespace floodgate::bench
