#include "admin/inspector.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "api/render.hpp"
#include "floodgate/inspect.hpp"

namespace floodgate::service {
namespace json = boost::json;
namespace {

// The policy that decides a key in a check, and which override that is.
struct key_policy {
  std::shared_ptr<const runtime_snapshot> snapshot;  // keeps a run-time entry alive
  const rule* decides = nullptr;
  json::value override_info;  // null: the rule's own
};

key_policy resolve_key(const rule& base, const std::string& key, const runtime_overrides* live) {
  key_policy out;
  out.decides = &base;
  const override_table::entry* e = nullptr;
  const char* source = "rules";
  std::int64_t now = 0;
  if (live) {
    out.snapshot = live->current();
    now = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count();
    e = out.snapshot->find(base, key, now);
    source = "runtime";
  }
  if (!e && base.overrides) {
    e = base.overrides->find(key);
    source = "rules";
  }
  if (!e) return out;
  out.decides = &e->as_rule;
  json::object o;
  o["source"] = source;
  o["match"] = valid_utf8(e->match);
  o["kind"] = e->kind == match_kind::exact ? "exact" : "prefix";
  if (e->expires_at != 0) {
    o["expires_at_ms"] = e->expires_at;
    o["expires_in_ms"] = e->expires_at - now;
  }
  out.override_info = std::move(o);
  return out;
}

}  // namespace

inspector::inspector(std::shared_ptr<limiter> l, std::string url, const runtime_overrides* live,
                     std::size_t max_waiting, std::chrono::milliseconds raw_timeout)
    : limiter_(std::move(l)),
      url_(std::move(url)),
      live_(live),
      max_waiting_(max_waiting),
      raw_timeout_(raw_timeout) {
  worker_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      auto [request, done] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      done(run(request));
      lock.lock();
    }
  });
}

inspector::~inspector() {
  stop();
}

void inspector::submit(key_request r, done_fn done) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_ && queue_.size() < max_waiting_) {
      queue_.emplace_back(std::move(r), std::move(done));
      wake_.notify_one();
      return;
    }
  }
  done(admin_error(503, "too many key requests at once; try again"));
}

void inspector::cancel() {
  std::deque<std::pair<key_request, done_fn>> left;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    left.swap(queue_);
    if (reading_) reading_->stop();
  }
  wake_.notify_one();
  for (auto& [request, done] : left) done(admin_error(503, "shutting down"));
}

void inspector::stop() {
  cancel();
  if (worker_.joinable()) worker_.join();
}

http_response inspector::run(const key_request& r) {
  const auto& rule = *r.rule;
  const auto k = resolve_key(rule, r.key, live_);
  const auto& p = k.decides->policy;
  if (r.what == key_request::action::reset) {
    if (const auto ec = limiter_->reset(r.key, p))
      return admin_error(503, "backend: " + ec.message());
    json::object o;
    o["rule"] = rule.name();
    o["key"] = valid_utf8(r.key);
    o["override"] = k.override_info;
    o["reset"] = true;
    return admin_json(json::serialize(o));
  }
  // The peek first: it is what a check would see; the raw read after it may be a moment later.
  const auto peek = limiter_->check(r.key, p, 0);
  if (peek.outcome == outcome::backend_error || peek.outcome == outcome::invalid_request)
    return admin_error(peek.outcome == outcome::backend_error ? 503 : 400,
                       "backend: " + peek.error.message());
  json::object o;
  o["rule"] = rule.name();
  o["algorithm"] = std::string(to_string(p.algo()));
  o["limit"] = p.limit();
  o["window_ms"] = p.window().count();
  o["capacity"] = p.capacity();
  o["shadow"] = rule.shadow;
  o["key"] = valid_utf8(r.key);  // the decoded query: any byte
  o["override"] = k.override_info;
  o["remaining"] = peek.decision.remaining;
  o["reset_after_ms"] = peek.decision.reset_after.count();
  o["local"] = peek.local;            // answered in this process
  o["local_mode"] = peek.local_mode;  // ... because the backend is unreachable (failure_mode)
  o["backend"] = std::string(limiter_->get_backend().kind());
  // Registered while it reads, so that cancel() can cut it short; one begun after cancel()
  // stops at once.
  redis_inspector reader(url_, raw_timeout_);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) reader.stop();
    reading_ = &reader;
  }
  const auto raw = reader.read_state(p, r.key);
  {
    std::lock_guard lock(mutex_);
    reading_ = nullptr;
  }
  if (!raw.readable) {
    o["raw"] = nullptr;
    o["raw_note"] = raw.why_not;
  } else if (!raw.error.empty()) {
    o["raw"] = nullptr;
    o["raw_note"] = "could not read it: " + raw.error;
  } else {
    json::object s;
    s["node"] = raw.node;  // host:port that holds it (Cluster: the slot's master)
    s["redis_key"] = valid_utf8(raw.redis_key);
    s["type"] = raw.type;
    s["value"] = valid_utf8(raw.value);
    if (raw.members >= 0) s["members"] = raw.members;
    s["ttl_ms"] = raw.ttl_ms;
    o["raw"] = std::move(s);
  }
  return admin_json(json::serialize(o));
}

}  // namespace floodgate::service
