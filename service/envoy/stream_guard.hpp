// The gRPC calls whose request message has not arrived yet, counted against two caps (in all,
// and from one client address) and each given a deadline. gRPC 1.51's server kept a stream that
// sent part of a message and stalled for as long as its client liked, a message's worth of
// bytes buffered, with no cap but SETTINGS_MAX_CONCURRENT_STREAMS per connection: 80
// connections of 1,000 such streams took 2.2 GB and every legitimate call failed (issue 28,
// item 2). Calls are counted here from their headers to their message, the only time a client
// controls. Pure: no clock and no thread of its own (grpc_server.cpp sweeps it).
//
//   stream_guard g({.max_reading = 1024, .max_reading_per_peer = 256, .message_timeout = 1s});
//   auto t = g.admit("10.0.0.7", now, &call);   // t.what != admitted: refuse the call
//   if (t.evicted) end t.evicted;   // the oldest waiting call, to make room
//   if (!g.arrived(t.id)) return;   // (on its message) the sweeper took it: not ours to end
//   for (void* r : g.expire(now)) end r as timed out;
//
// Over the per-address cap a call is refused: that address holds enough. At the global cap the
// oldest waiting call is evicted instead, so that clients from many addresses cannot keep
// everyone else out: a legitimate message arrives in microseconds, so it is never the oldest
// unless a thousand calls were opened meanwhile (HTTP's connection caps evict the same way).
// Whoever removes an entry ends the call: arrived() true, its connection; expire() or an eviction,
// whoever called it. So a call is never ended twice, nor touched once ended.
// Threading: every member from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace floodgate::service::envoy {

struct stream_caps {
  std::size_t max_reading = 1024;          // calls waiting for their message, in all (then the
                                           // oldest is evicted)
  std::size_t max_reading_per_peer = 256;  // of them from one client address
  // A call whose message has not arrived this long after its headers is ended
  // (DEADLINE_EXCEEDED). An Envoy's request is one frame: it takes microseconds.
  std::chrono::milliseconds message_timeout{1000};
};

class stream_guard {
 public:
  using clock = std::chrono::steady_clock;
  enum class verdict { admitted, over_per_peer };
  struct ticket {
    verdict what = verdict::admitted;
    std::uint64_t id = 0;     // for arrived(), when admitted
    void* evicted = nullptr;  // the call taken out to make room: the caller ends it
  };

  explicit stream_guard(stream_caps caps) : caps_(caps) {}

  // A call's headers arrived from `peer`; `owner` is what expire() and evictions give back.
  ticket admit(const std::string& peer, clock::time_point now, void* owner);
  // Its message arrived (or its read failed): true if it was still waiting, and is now the
  // caller's to end; false if expire() took it first.
  bool arrived(std::uint64_t id);
  // The calls past their deadline, removed: the caller ends each.
  std::vector<void*> expire(clock::time_point now);
  // The earliest deadline of the calls waiting, if any.
  std::optional<clock::time_point> next_deadline() const;
  std::size_t size() const;
  const stream_caps& caps() const noexcept { return caps_; }

 private:
  struct entry {
    clock::time_point deadline;
    std::string peer;
    void* owner;
  };
  void erase(std::map<std::uint64_t, entry>::iterator it);  // under mutex_

  stream_caps caps_;
  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  // By admission, so by deadline too (one timeout for all): expire() looks at the front only.
  std::map<std::uint64_t, entry> waiting_;
  std::unordered_map<std::string, std::size_t> per_peer_;
};

}  // namespace floodgate::service::envoy
