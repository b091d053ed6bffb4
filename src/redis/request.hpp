// One call travelling through the client: an encoded command, its deadline, and what to do
// with the outcome. The client owns it from submit() until it completes it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "floodgate/decision.hpp"
#include "redis/reply.hpp"
#include "redis/scripts.hpp"

namespace floodgate::redis {

class node;
class request;
using request_ptr = std::unique_ptr<request>;

// Who decides what a call's outcome means before its caller hears it: the topology's routing
// (a Cluster follows MOVED and ASK and retries TRYAGAIN; Sentinel parks a READONLY call for the
// new primary). The thread the call completes on.
class call_router {
 public:
  // `r` completed with `ec` and `reply` (as complete() gets them), after its observer heard:
  // the router either sends it again (it keeps `r`) or answers it with r->complete().
  virtual void call_done(request_ptr r, std::error_code ec, reply* reply) noexcept = 0;

 protected:
  ~call_router() = default;
};

class request {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~request() = default;

  // Called exactly once, then the request is destroyed. `ec` is empty on a reply that is not
  // an error. An error reply is mapped to a code (see error_for) and `r` points to it too, so
  // the cluster client can read MOVED/ASK targets; `r` is null when there is no reply. Runs on the
  // client's thread, or inline in submit() once the client is shutting down; never under the
  // client's locks. Must not throw.
  virtual void complete(std::error_code ec, reply* r) noexcept = 0;

  // Called instead of complete() when the request was decided as one item of a batch call
  // (see `part`): its decision, as read from the batch's reply. Only batchable requests are
  // batched; the default (for any other) fails it with errc::protocol_error.
  virtual void complete_part(const decision& d) noexcept;

  // How a connection completes the request it holds: `observer` first, then its router
  // (route.by), which may keep it to send again, else complete() or complete_part().
  // (complete() is what a request implements; finish() what connections call, so a node and
  // a router learn every outcome without wrapping each call in another request.) node.cpp.
  static void finish(request_ptr r, std::error_code ec, reply* answer) noexcept;
  // A batch item's decision is an answer: nothing to route.
  static void finish_part(request_ptr r, const decision& d) noexcept;

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
  // Set while the request is admitted to a node and on its way (node_pool::send): told the
  // outcome first by finish() (its circuit breaker and health). `probe`: it is that node's
  // half-open breaker's probe.
  node* observer = nullptr;
  bool probe = false;
  // The node's own PING while its breaker is open (node.cpp): its outcome is the breaker's only.
  bool breaker_ping = false;

  // Where the topology has sent the call so far, kept by its router (route.by) across sends:
  // the call itself goes again, never a copy of it.
  struct routing {
    call_router* by = nullptr;   // null: completed as it is
    node* target = nullptr;      // Cluster: a redirection's node, used regardless of the map
    std::uint64_t epoch = 0;     // Sentinel: the primary it was sent to
    std::uint8_t redirects = 0;  // Cluster: MOVED and ASK followed; Sentinel: re-sends
    std::uint8_t tryagains = 0;  // Cluster: TRYAGAIN and CLUSTERDOWN retries
  };
  routing route;

  // A single check may share one call of the batch script with other checks queued on the
  // same connection (connection::flush). Its `command` is then the lone call
  //   FCALL <function> 1 <key> <limit> <window_ms> <burst> <cost> <now_ms>
  // of `script` (or EVALSHA <sha1> ...: `encoded`), and these are the offsets in it of the
  // key's bulk string, of the limit's (the first of the four item arguments), and of now_ms's
  // (the last argument). All zero for a request that cannot be batched. `capacity` is the
  // decision's limit (the policy's capacity), which the batch script's reply leaves out.
  struct batch_part {
    std::uint32_t key = 0, args = 0, now = 0;
    std::int64_t capacity = 0;
    bool batchable() const noexcept { return key != 0; }
  };
  batch_part part;
};

// A request whose outcome `f(ec, reply*)` reads, as complete() gets it: a call made here needs
// no class of its own.
template <class F>
request_ptr on_reply(F f) {
  struct reply_call final : request {
    explicit reply_call(F g) : f_(std::move(g)) {}
    void complete(std::error_code ec, reply* r) noexcept override { f_(ec, r); }
    F f_;
  };
  return std::make_unique<reply_call>(std::move(f));
}

// The error code for an error reply: BUSY → server_busy, OOM → out_of_memory, others →
// server_error.
std::error_code error_for(const reply& r) noexcept;

}  // namespace floodgate::redis
