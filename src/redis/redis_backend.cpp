#include "redis/redis_backend.hpp"

#include <algorithm>

#include "core/params.hpp"
#include "floodgate/errors.hpp"
#include "redis/client.hpp"
#include "redis/cluster_client.hpp"
#include "redis/cluster_protocol.hpp"
#include "redis/key.hpp"
#include "redis/resp_writer.hpp"
#include "redis/script_decision.hpp"
#include "redis/sentinel_client.hpp"
#include "redis/sha256.hpp"
#include "redis/topology.hpp"

namespace floodgate::redis {
namespace {

// Every script the calls below run; lone checks queued together go as one call of the batch
// script (batch.hpp).
script_set all_scripts() {
  return {{&script_for(algorithm::sliding_log), &script_for(algorithm::sliding_window),
           &script_for(algorithm::fixed_window), &script_for(algorithm::token_bucket),
           &script_for(algorithm::gcra), &multi_script(), &batch_script(), &multi_block_script(),
           &refund_script(), &acquire_script(), &release_script()},
          &batch_script(),
          &script_library()};
}

// The all-or-nothing scripts' (multi, multi_block) five integers per item (script_decision).
std::error_code decode(std::span<const reply> elements, std::size_t items,
                       std::vector<decision>& out) {
  if (elements.size() != 5 * items) return errc::protocol_error;
  for (const auto& e : elements)
    if (e.kind != reply::type::integer) return errc::protocol_error;
  out.reserve(items);
  for (std::size_t i = 0; i < items; ++i) {
    const reply* f = &elements[5 * i];
    const auto d =
        script_decision(f[0].integer, f[1].integer, f[2].integer, f[3].integer, f[4].integer);
    if (!d) return errc::protocol_error;
    out.push_back(*d);
  }
  return {};
}

// A lone check's reply (lua/single.lua, script_decision.hpp's lone_decision): one integer when
// allowed, else an array of two or three.
std::error_code decode_lone(const reply& r, std::int64_t capacity, std::vector<decision>& out) {
  std::int64_t v[3];
  std::size_t n = 0;
  const bool packed = r.kind == reply::type::integer;
  if (packed) {
    v[n++] = r.integer;
  } else {
    if (r.kind != reply::type::array || r.elements.size() > 3) return errc::protocol_error;
    for (const auto& e : r.elements) {
      if (e.kind != reply::type::integer) return errc::protocol_error;
      v[n++] = e.integer;
    }
  }
  const auto d = lone_decision(capacity, packed, std::span<const std::int64_t>(v, n));
  if (!d) return errc::protocol_error;
  out.push_back(*d);
  return {};
}

class check_call final : public request {
 public:
  // `lone_capacity`: 0 when the call answers five integers per item (the all-or-nothing
  // scripts), else the call is a lone check (a per-algorithm script) of that capacity, which
  // its reply is read with. (Kept here: `part`, which carries it for batching, is cleared
  // when a Cluster redirection sends the call again.)
  check_call(std::size_t items, backend_handler handler, std::int64_t lone_capacity = 0)
      : items_(items), lone_capacity_(lone_capacity), handler_(std::move(handler)) {}

  void complete(std::error_code ec, reply* r) noexcept override {
    backend_reply out;
    if (ec)
      out.error = ec;
    else if (lone_capacity_ > 0)
      out.error = decode_lone(*r, lone_capacity_, out.decisions);
    else if (r->kind != reply::type::array)
      out.error = errc::protocol_error;
    else
      out.error = decode(r->elements, items_, out.decisions);
    if (out.error) out.decisions.clear();
    handler_(std::move(out));
  }

  // A batch item (only lone checks are batched): the decision is read already.
  void complete_part(const decision& d) noexcept override {
    backend_reply out;
    out.decisions.push_back(d);
    handler_(std::move(out));
  }

 private:
  std::size_t items_;
  std::int64_t lone_capacity_;
  backend_handler handler_;
};

bool integers(const reply& r, std::size_t n) noexcept {
  return r.kind == reply::type::array && r.elements.size() == n &&
         std::all_of(r.elements.begin(), r.elements.end(),
                     [](const reply& e) { return e.kind == reply::type::integer; });
}

// Once a second per instance, so EVAL (no script to keep loaded) is cheap enough.
constexpr std::string_view heartbeat_script = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
)lua";

bool any_penalty(std::span<const check_item> items) noexcept {
  for (const auto& item : items)
    if (item.policy->block_for().count() > 0) return true;
  return false;
}

// <FCALL function | EVALSHA sha1> <numkeys>: the header every script call starts with, in
// `form`. Records where the arguments after the function or SHA1 begin, so a connection can
// send the call in another form (connection::append_call) after a refusal or NOSCRIPT. Calls
// off the decision path (refunds, leases) go as EVALSHA: the connection writes their header
// as FCALL while the library is loaded. Returns the command, for the arguments to follow.
std::string& begin_script_call(request& r, const script& s, std::size_t keys, std::size_t args,
                               script_call form = script_call::evalsha) {
  r.script = &s;
  r.encoded = form;
  r.argument_count = 3 + keys + args;
  append_array_header(r.command, r.argument_count);
  append_script_head(r.command, s, form);
  r.body_offset = r.command.size();
  append_bulk(r.command, static_cast<std::int64_t>(keys));
  return r.command;
}

// limit, window, burst: the numbers the scripts keep the state in (core::params::of: a token
// bucket's rate reduced).
void append_params(std::string& out, const policy& p) {
  const auto q = core::params::of(p);
  append_bulk(out, q.limit);
  append_bulk(out, q.window);
  append_bulk(out, q.burst);
}

// One item of the all-or-nothing scripts (multi.lua, multi_block.lua): algorithm, limit,
// window, burst, cost.
void append_item(std::string& out, const policy& p, std::int64_t cost) {
  append_bulk(out, to_string(p.algo()));
  append_params(out, p);
  append_bulk(out, cost);
}

void append_now(std::string& out, const redis_options& o) {
  if (o.test_clock)
    append_bulk(out, static_cast<std::int64_t>(o.test_clock().count()));
  else
    append_bulk(out, std::string_view{});
}

}  // namespace

redis_backend::redis_backend(std::string_view full_url, const redis_options& options)
    : options_(options) {
  auto target = parse_topology(full_url, options_);
  if (options_.key_prefix.find_first_of("{}") != std::string::npos)
    throw config_error(
        "redis_options: key_prefix must not contain '{' or '}' (it would move the Redis Cluster "
        "hash tag)");
  switch (target.what) {
    case topology::kind::cluster:
      if (target.tls()) validate_tls_options(options_.tls);
      cluster_ = true;
      kind_ = "redis-cluster";
      client_ = make_cluster_client(std::move(target.nodes), options_, all_scripts());
      return;
    case topology::kind::sentinel:
      kind_ = "redis-sentinel";
      client_ = make_sentinel_client(std::move(target.sentinel), options_, all_scripts());
      return;
    case topology::kind::single:
      if (target.tls()) validate_tls_options(options_.tls);
      client_ = make_client(target.nodes.front(), options_, all_scripts());
      return;
  }
}

// The slot of a state key: of its hash tag, which is the caller key as stored.
int redis_backend::slot_of(std::string_view caller_key) const {
  if (!cluster_) return -1;
  if (stored_as_hash(caller_key, options_.max_plain_key_size))
    return key_slot("#" + sha256_hex(caller_key));
  return static_cast<int>(crc16(caller_key) % cluster_slots);
}

request_ptr redis_backend::start_call(int slot, request_ptr call) const {
  call->deadline = request::clock::now() + options_.timeout;
  call->slot = slot;
  return call;
}

void redis_backend::async_check(std::span<const check_item> items, backend_handler handler) {
  if (items.empty()) return handler({make_error_code(errc::no_items), {}});
  const auto keys = this->keys();
  const int slot = slot_of(items.front().key);
  for (const auto& item : items.subspan(1))
    if (slot_of(item.key) != slot) return handler({make_error_code(errc::cross_slot), {}});
  const bool penalty = any_penalty(items);
  const bool lone = items.size() == 1 && !penalty;
  auto call =
      start_call(slot, std::make_unique<check_call>(items.size(), std::move(handler),
                                                    lone ? items.front().policy->capacity() : 0));
  // As connections send it while the library is loaded: encoded once, sent as it is.
  const auto form = options_.use_functions ? script_call::fcall : script_call::evalsha;
  std::size_t size = 128;
  for (const auto& item : items) size += 96 + state_key_size(keys, *item.policy, item.key);
  std::string& out = call->command;
  out.reserve(size);
  if (penalty) {
    // Never batched: the batch script knows no penalties (and checks without one pay nothing
    // for them).
    begin_script_call(*call, multi_block_script(), 2 * items.size(), 1 + 6 * items.size(), form);
    for (const auto& item : items) append_state_key_bulk(out, keys, *item.policy, item.key);
    for (const auto& item : items) append_block_key_bulk(out, keys, *item.policy, item.key);
    append_now(out, options_);
    for (const auto& item : items) {
      append_item(out, *item.policy, item.cost);
      append_bulk(out, static_cast<std::int64_t>(item.policy->block_for().count()));
    }
  } else if (lone) {
    const auto& item = items.front();
    const policy& p = *item.policy;
    begin_script_call(*call, script_for(p.algo()), 1, 5, form);
    // Where the batch script finds its parts (connection::flush may batch it).
    call->part.key = static_cast<std::uint32_t>(out.size());
    append_state_key_bulk(out, keys, p, item.key);
    call->part.args = static_cast<std::uint32_t>(out.size());
    append_params(out, p);
    append_bulk(out, item.cost);
    call->part.now = static_cast<std::uint32_t>(out.size());
    call->part.capacity = p.capacity();
    append_now(out, options_);
  } else {
    begin_script_call(*call, multi_script(), items.size(), 1 + 5 * items.size(), form);
    for (const auto& item : items) append_state_key_bulk(out, keys, *item.policy, item.key);
    append_now(out, options_);
    for (const auto& item : items) append_item(out, *item.policy, item.cost);
  }
  client_->submit(std::move(call));
}

// The refund script's reply: a peek's five integers, the cost given back (0..cost) and 1 for a
// replay under the idempotency key, else 0.
void redis_backend::async_refund(const check_item& item, std::string_view idempotency_key,
                                 backend_handler handler) {
  const policy& p = *item.policy;
  auto call = start_call(
      slot_of(item.key),
      on_reply([cost = item.cost, handler = std::move(handler)](std::error_code ec, reply* r) {
        backend_reply out;
        if (!ec && !integers(*r, 7)) ec = errc::protocol_error;
        if (!ec) {
          const auto& e = r->elements;
          out.refunded = e[5].integer;
          out.replayed = e[6].integer == 1;
          if (out.refunded < 0 || out.refunded > cost || (e[6].integer != 0 && e[6].integer != 1))
            ec = errc::protocol_error;
          else
            ec = decode(std::span<const reply>(e).first(5), 1, out.decisions);
        }
        if (ec) out = {ec, {}};
        handler(std::move(out));
      }));
  const bool keyed = !idempotency_key.empty();
  std::string& out = begin_script_call(*call, refund_script(), keyed ? 2 : 1, keyed ? 7 : 6);
  append_state_key_bulk(out, keys(), p, item.key);
  if (keyed)
    append_bulk(out, state_key(keys(), p, item.key) + ":rf:" + std::string(idempotency_key));
  append_bulk(out, to_string(p.algo()));
  append_params(out, p);
  append_bulk(out, item.cost);
  append_now(out, options_);
  if (keyed) append_bulk(out, refund_key_memory(p).count());
  client_->submit(std::move(call));
}

void redis_backend::async_acquire(std::string_view key, const concurrency_policy& p,
                                  std::string_view id, backend_handler handler) {
  auto call = start_call(slot_of(key), std::make_unique<check_call>(1, std::move(handler)));
  std::string& out = begin_script_call(*call, acquire_script(), 1, 4);
  append_bulk(out, lease_key(keys(), p, key));
  append_bulk(out, p.limit());
  append_bulk(out, static_cast<std::int64_t>(p.lease().count()));
  append_bulk(out, id);
  append_now(out, options_);
  client_->submit(std::move(call));
}

void redis_backend::async_release(std::string_view key, const concurrency_policy& p,
                                  std::string_view id, std::chrono::milliseconds ttl,
                                  std::function<void(lease_result)> handler) {
  auto call = start_call(
      slot_of(key), on_reply([handler = std::move(handler)](std::error_code ec, reply* r) {
        if (!ec && (r->kind != reply::type::integer || (r->integer != 0 && r->integer != 1)))
          ec = errc::protocol_error;
        handler({!ec && r->integer == 1, ec});
      }));
  std::string& out = begin_script_call(*call, release_script(), 1, 3);
  append_bulk(out, lease_key(keys(), p, key));
  append_bulk(out, id);
  append_bulk(out, static_cast<std::int64_t>(ttl.count()));
  append_now(out, options_);
  client_->submit(std::move(call));
}

void redis_backend::async_reset(std::string_view key, const policy& p, reset_handler handler) {
  auto call = start_call(slot_of(key),
                         on_reply([handler = std::move(handler)](std::error_code ec, reply* r) {
                           if (!ec && r->kind != reply::type::integer) ec = errc::protocol_error;
                           handler(ec);
                         }));
  // The penalty too, with or without one now: a block left by an earlier policy must not
  // outlive a reset.
  append_array_header(call->command, 3);
  append_bulk(call->command, "DEL");
  append_state_key_bulk(call->command, keys(), p, key);
  append_block_key_bulk(call->command, keys(), p, key);
  client_->submit(std::move(call));
}

// lua/reserve.lua answers seven integers: granted, its window and the ms it may be spent
// within, then the key's limit, remaining, reset_after and retry_after after the grant.
void redis_backend::async_reserve(std::string_view key, const policy& p, std::int64_t wanted,
                                  std::function<void(reserve_reply)> handler) {
  auto call = start_call(
      slot_of(key), on_reply([handler = std::move(handler)](std::error_code ec, reply* r) {
        reserve_reply out;
        if (!ec && !integers(*r, 7)) ec = errc::protocol_error;
        if (!ec) {
          const auto& e = r->elements;
          const auto after =
              script_decision(1, e[3].integer, e[4].integer, e[5].integer, e[6].integer);
          if (!after || e[0].integer < 0 || e[2].integer < 0)
            ec = errc::protocol_error;
          else
            out = {{}, e[0].integer, e[1].integer, std::chrono::milliseconds{e[2].integer}, *after};
        }
        if (ec) out = {ec, 0, 0, {}, {}};
        handler(std::move(out));
      }));
  std::string& out = begin_script_call(*call, reserve_script(), 1, 6);
  append_state_key_bulk(out, keys(), p, key);
  append_bulk(out, to_string(p.algo()));
  append_params(out, p);
  append_bulk(out, wanted);
  append_now(out, options_);
  client_->submit(std::move(call));
}

// lua/give_back.lua answers two integers: the units given back, and 1 for a replay.
void redis_backend::async_give_back(std::string_view key, const policy& p, std::int64_t window,
                                    std::int64_t units, std::string_view id,
                                    backend_handler handler) {
  auto call = start_call(slot_of(key),
                         on_reply([handler = std::move(handler)](std::error_code ec, reply* r) {
                           backend_reply out{ec, {}};
                           if (!ec && (!integers(*r, 2) || r->elements[0].integer < 0))
                             out.error = errc::protocol_error;
                           if (!out.error) {
                             out.refunded = r->elements[0].integer;
                             out.replayed = r->elements[1].integer == 1;
                           }
                           handler(std::move(out));
                         }));
  std::string& out = begin_script_call(*call, give_back_script(), 2, 5);
  append_state_key_bulk(out, keys(), p, key);
  append_bulk(out, state_key(keys(), p, key) + ":gb:" + std::string(id));  // the key's hash slot
  append_bulk(out, to_string(p.algo()));
  append_bulk(out, static_cast<std::int64_t>(p.window().count()));
  append_bulk(out, window);
  append_bulk(out, units);
  append_now(out, options_);
  client_->submit(std::move(call));
}

void redis_backend::async_heartbeat(std::string_view instance, std::chrono::milliseconds ttl,
                                    std::function<void(std::error_code, std::int64_t)> handler) {
  const std::string key = options_.key_prefix + "{instances}";
  auto call = start_call(cluster_ ? key_slot(key) : -1,
                         on_reply([handler = std::move(handler)](std::error_code ec, reply* r) {
                           if (!ec && (r->kind != reply::type::integer || r->integer < 1))
                             ec = errc::protocol_error;
                           handler(ec, ec ? 0 : r->integer);
                         }));
  append_command(call->command, {"EVAL", std::string(heartbeat_script), "1", key,
                                 std::string(instance), std::to_string(ttl.count())});
  client_->submit(std::move(call));
}

}  // namespace floodgate::redis
