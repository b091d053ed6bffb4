#include "rules/overrides_watch.hpp"

#include <spdlog/spdlog.h>

#include "logging/log_format.hpp"

namespace floodgate::service {

overrides_watch::overrides_watch(overrides_store& store, apply_fn apply,
                                 overrides_watch_options options)
    : store_(store),
      changes_(store.ref().url, store.channel(), std::chrono::seconds(1)),
      apply_(std::move(apply)),
      options_(options) {
  check(true);
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

overrides_watch::~overrides_watch() {
  thread_.request_stop();
  changes_.stop();
  store_.stop();
}

void overrides_watch::resync() {
  {
    std::lock_guard lock(mutex_);
    resync_ = true;
  }
  wake_.notify_one();
}

std::int64_t overrides_watch::version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

void overrides_watch::run(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    const auto got =
        changes_.wait(changes_.subscribed() ? options_.subscribed_interval : options_.interval);
    if (stop.stop_requested()) break;
    for (const auto& p : got.payloads)
      if (const auto v = overrides_announcement(p))
        spdlog::debug("msg=\"run-time overrides version announced\" version={}", *v);
    bool force = false;
    {
      std::unique_lock lock(mutex_);
      // A failed subscribe returns at once (rules_watch logs it): wait the interval.
      if (!got.error.empty() && got.payloads.empty())
        wake_.wait_for(lock, stop, options_.interval, [this] { return resync_; });
      force = resync_;
      resync_ = false;
    }
    if (stop.stop_requested()) break;
    check(force);
  }
}

void overrides_watch::check(bool force) {
  const auto where = store_.ref().describe();
  auto failed = [&](const std::string& why) {
    std::lock_guard lock(mutex_);
    if (error_ != why)
      spdlog::error(
          "msg=\"run-time overrides unreadable; the ones in force stay until they expire\" "
          "rules_from={} error={}",
          quote(where), quote(why));
    error_ = why;
  };
  std::string error;
  const auto v = store_.version(error);
  if (!v) return failed(error);
  {
    std::lock_guard lock(mutex_);
    if (!force && *v == version_ && error_.empty()) return;
  }
  const auto list = store_.list();
  if (!list.error.empty()) return failed(list.error);
  apply_(list);
  std::lock_guard lock(mutex_);
  if (!error_.empty())
    spdlog::info("msg=\"run-time overrides readable again\" rules_from={}", quote(where));
  error_.clear();
  version_ = list.version;
}

}  // namespace floodgate::service
