// One call travelling through the client: an encoded command, its deadline, and what to do
// with the outcome. The client owns it from submit() until it completes it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>

#include "floodgate/decision.hpp"
#include "redis/reply.hpp"
#include "redis/scripts.hpp"

namespace floodgate::redis {

class request;

// Who hears of a call's outcome before its caller does: the node it was admitted to (its
// circuit breaker and health, node.hpp). Io thread.
class call_observer {
 public:
  // `r` completed with `ec` (empty for an answer, as complete() gets it; a batch item's
  // decision is an answer).
  virtual void call_finished(const request& r, std::error_code ec) noexcept = 0;

 protected:
  ~call_observer() = default;
};

class request {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~request() = default;

  // Called exactly once, then the request is destroyed. `ec` is empty on a reply that is not
  // an error. An error reply is mapped to a code (see error_for) and `r` points to it too, so
  // the cluster client can read MOVED/ASK targets; `r` is null when there is no reply. Runs on the client's thread, or inline in submit() once the client is shutting
  // down; never under the client's locks. Must not throw.
  virtual void complete(std::error_code ec, reply* r) noexcept = 0;

  // Called instead of complete() when the request was decided as one item of a batch call
  // (see `part`): its decision, as read from the batch's reply. Only batchable requests are
  // batched; the default (for any other) fails it with errc::protocol_error.
  virtual void complete_part(const decision& d) noexcept;

  // How whoever holds the request completes it: `observer` first, then complete() or
  // complete_part(). (complete() is what a request implements; finish() what connections
  // call, so a node learns every outcome without wrapping each call in another request.)
  void finish(std::error_code ec, reply* r) noexcept {
    if (observer != nullptr) observer->call_finished(*this, ec);
    complete(ec, r);
  }
  void finish_part(const decision& d) noexcept {
    if (observer != nullptr) observer->call_finished(*this, {});
    complete_part(d);
  }

  // The command, RESP-encoded.
  std::string command;
  // For script calls: the script, so that a NOSCRIPT reply (the script did not run) can be
  // answered by loading it and sending the command again. Null for other commands.
  const redis::script* script = nullptr;
  // For script calls: how `command` is encoded (FCALL <function> or EVALSHA <sha1>), the
  // number of arguments, and where the argument after the function or SHA1 (numkeys) starts
  // in `command`, so a connection can send it in another form (connection::append_call)
  // without encoding it again when the form it needs is this one.
  script_call encoded = script_call::evalsha;
  std::size_t argument_count = 0;
  std::size_t body_offset = 0;
  // Past it, the call fails with errc::timeout (and a connection it is in flight on is dropped).
  clock::time_point deadline;
  // Replies saying the script did not run (NOSCRIPT, a missing function) so far.
  std::uint8_t noscript_replies = 0;
  // Cluster: send ASKING right before the command, on the same connection (an ASK redirect:
  // the slot is being imported by that node, which serves it only to callers that ask).
  bool asking = false;
  // Cluster: the hash slot of the command's keys; -1 when it has none.
  std::int32_t slot = -1;
  // Set while the request is admitted to a node and on its way (client.cpp): told the
  // outcome by finish(). `probe`: it is that node's half-open breaker's probe.
  call_observer* observer = nullptr;
  bool probe = false;

  // A single check may share one call of the batch script with other checks queued on the
  // same connection (connection::flush). Its `command` is then the lone call
  //   FCALL <function> 1 <key> <limit> <window_ms> <burst> <cost> <now_ms>
  // of `script` (or EVALSHA <sha1> ...: `encoded`), and these are the offsets in it of the key's bulk string, of the limit's
  // (the first of the four item arguments), and of now_ms's (the last argument). All zero for
  // a request that cannot be batched. `capacity` is the decision's limit (the policy's
  // capacity), which the batch script's reply leaves out.
  struct batch_part {
    std::uint32_t key = 0, args = 0, now = 0;
    std::int64_t capacity = 0;
    bool batchable() const noexcept { return key != 0; }
  };
  batch_part part;

  // Moves `from`'s command here with what describes it (script, offsets, deadline, slot,
  // part): for a request that carries another one through a cluster or a sentinel client.
  void take_call(request& from) noexcept {
    command = std::move(from.command);
    script = from.script;
    encoded = from.encoded;
    argument_count = from.argument_count;
    body_offset = from.body_offset;
    deadline = from.deadline;
    slot = from.slot;
    part = from.part;
  }
};

// The error code for an error reply: BUSY → server_busy, OOM → out_of_memory, others →
// server_error.
std::error_code error_for(const reply& r) noexcept;

}  // namespace floodgate::redis
