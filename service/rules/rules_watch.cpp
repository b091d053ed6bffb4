#include "rules/rules_watch.hpp"

#include <spdlog/spdlog.h>

#include "logging/log_format.hpp"

namespace floodgate::service {

std::int64_t unix_ms_now() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

rules_watch::rules_watch(rules_store& store, const rules_version& first, apply_fn apply,
                         rules_watch_options options)
    : store_(store),
      changes_(store.ref().url, store.channel(), std::chrono::seconds(1)),
      apply_(std::move(apply)),
      options_(options) {
  state_.from_redis = true;
  state_.where = store.ref().describe();
  state_.version = state_.latest = first.version;
  state_.applied_at_ms = state_.checked_at_ms = unix_ms_now();
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

rules_watch::~rules_watch() {
  thread_.request_stop();
  changes_.stop();  // a wait in progress returns at once
  store_.stop();    // and so does a read
}

void rules_watch::poke() {
  {
    std::lock_guard lock(mutex_);
    poked_ = true;
  }
  wake_.notify_one();
}

rules_state rules_watch::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

void rules_watch::run(const std::stop_token& stop) {
  std::string told;  // the subscription's failure last logged
  while (!stop.stop_requested()) {
    // A poke (SIGHUP) is served at the next read, within one interval.
    const auto got =
        changes_.wait(changes_.subscribed() ? options_.subscribed_interval : options_.interval);
    if (stop.stop_requested()) break;
    if (got.error != told && !got.error.empty())
      spdlog::warn("msg=\"rules subscription failing; reading the version every {} ms\" error={}",
                   options_.interval.count(), quote(got.error));
    else if (got.error.empty() && !told.empty())
      spdlog::info("msg=\"rules subscription back\"");
    told = got.error;
    for (const auto& v : got.payloads)
      spdlog::debug("msg=\"rules version announced\" version={}", quote(v));
    const bool failed = !got.error.empty();
    {
      std::lock_guard lock(mutex_);
      state_.subscribed = !failed && changes_.subscribed();
      poked_ = false;
    }
    // A failed subscribe returns at once: wait the interval before trying again.
    if (failed && got.payloads.empty()) {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, stop, options_.interval, [this] { return poked_; });
    }
    if (stop.stop_requested()) break;
    check();
  }
}

void rules_watch::check() {
  const auto where = state().where;
  std::string error;
  auto failed = [&](const std::string& why) {
    std::lock_guard lock(mutex_);
    if (state_.redis_error != why)
      spdlog::error(
          "msg=\"rules source failing; the rules in force stay\" rules_from={} version={} "
          "error={}",
          quote(where), state_.version, quote(why));
    state_.redis_error = why;
  };
  const auto v = store_.version(error);
  if (!v) return failed(error);
  std::int64_t latest = 0;
  {
    std::lock_guard lock(mutex_);
    if (!state_.redis_error.empty())
      spdlog::info("msg=\"rules source answering again\" rules_from={} version={}", quote(where),
                   state_.version);
    state_.redis_error.clear();
    state_.checked_at_ms = unix_ms_now();
    latest = state_.latest;
  }
  // Unchanged, or a version already refused: nothing to do until the next push.
  if (*v == latest || *v == 0) return;
  auto doc = store_.head(error);
  if (!doc) return failed(error);
  if (doc->version == 0) return;
  const auto refused = apply_(*doc);
  std::lock_guard lock(mutex_);
  state_.latest = doc->version;
  if (refused.empty()) {
    state_.version = doc->version;
    state_.refused.clear();
    state_.applied_at_ms = unix_ms_now();
  } else {
    state_.refused = refused;
    ++state_.apply_failures;
  }
}

}  // namespace floodgate::service
