// The Redis backend: every decision is one Lua script run atomically inside Redis
// (docs/algorithms.md), encoded once here and sent through the URL's topology (transport.hpp:
// client.hpp, cluster_client.hpp, sentinel_client.hpp).
//
//   auto b = std::make_shared<floodgate::redis::redis_backend>("redis://127.0.0.1:6379");
//   floodgate::limiter limiter{b};
//
// On a Cluster every call carries its keys' hash slot, and a check_all whose items land in
// different slots fails with errc::cross_slot (floodgate keys of one caller key always share a
// slot).
//
// One item is checked with its algorithm's script, several with the all-or-nothing multi
// script; a reset is a DEL. Keys are laid out as key.hpp says. Calls fail with a backend
// error code (errors.hpp) and never throw.
//
// Threading and lifetimes: as floodgate::backend says. Completions run on the backend's own
// thread (or inline once it is being destroyed), and must not block; destroying the backend
// completes everything in flight with errc::shutting_down.
#pragma once

#include <memory>
#include <string_view>

#include "floodgate/backend.hpp"
#include "floodgate/options.hpp"
#include "floodgate/semaphore.hpp"
#include "redis/key.hpp"
#include "redis/transport.hpp"

namespace floodgate::redis {

class redis_backend final : public backend, public lease_backend {
 public:
  // Throws config_error for a malformed URL (see url.hpp) or unusable options. Does not wait
  // for the server: connecting happens in the background, and calls made before it is done
  // wait for it within their deadline.
  redis_backend(std::string_view url, const redis_options& options = {});

  void async_check(std::span<const check_item> items, backend_handler handler) override;
  void async_reset(std::string_view key, const policy& p, reset_handler handler) override;
  void async_reserve(std::string_view key, const policy& p, std::int64_t wanted,
                     std::function<void(reserve_reply)> handler) override;
  void async_give_back(std::string_view key, const policy& p, std::int64_t window,
                       std::int64_t units, std::string_view id, backend_handler handler) override;
  // One call of the refund script (lua/refund.lua).
  // With an idempotency key, its marker `<state key>:rf:<idempotency key>` (the same slot).
  void async_refund(const check_item& item, std::string_view idempotency_key,
                    backend_handler handler) override;
  // One call of lua/acquire.lua or lua/release.lua on the key's lease set.
  void async_acquire(std::string_view key, const concurrency_policy& p, std::string_view id,
                     backend_handler handler) override;
  void async_release(std::string_view key, const concurrency_policy& p, std::string_view id,
                     std::chrono::milliseconds ttl,
                     std::function<void(lease_result)> handler) override;
  // One sorted set per key prefix, `<prefix>{instances}`: member = instance, score = its last
  // heartbeat on Redis's clock; members older than ttl are dropped and the rest counted.
  void async_heartbeat(std::string_view instance, std::chrono::milliseconds ttl,
                       std::function<void(std::error_code, std::int64_t)> handler) override;
  bool healthy() const noexcept override { return client_->healthy(); }
  std::string_view kind() const noexcept override { return kind_; }
  backend_stats stats() const noexcept override { return client_->stats(); }
  std::string last_error() const override { return client_->last_error(); }
  bool check_all_needs_one_key() const noexcept override { return cluster_; }

  const redis_options& options() const noexcept { return options_; }

 private:
  // On a Cluster, the slot of a caller key's state (the calls carry it); elsewhere -1.
  int slot_of(std::string_view caller_key) const;
  key_format keys() const noexcept { return {options_.key_prefix, options_.max_plain_key_size}; }
  // `call`, due within the timeout, for `slot`.
  std::unique_ptr<request> start_call(int slot, std::unique_ptr<request> call) const;

  redis_options options_;
  bool cluster_ = false;
  std::string_view kind_ = "redis";
  std::unique_ptr<transport> client_;
};

}  // namespace floodgate::redis
