// A TCP relay between a client and a real server on loopback that misbehaves on request, for
// fault tests through a real network path: added latency, a black hole, a stalled (half-open)
// connection, replies sliced into single bytes, connections reset mid-reply.
//
//   floodgate::test::redis_server redis;
//   floodgate::test::fault_relay relay{redis.port()};
//   floodgate::limiter l{relay.url()};
//   relay.set_latency(150ms);                    // every reply held 150 ms
//   relay.set_fault(fault_relay::fault::black_hole);
//
// One thread polls every socket; a fault applies to connections open now and to new ones.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace floodgate::test {

class fault_relay {
 public:
  enum class fault {
    none,
    // Accepts and reads, forwards nothing either way: a route that loses every packet.
    black_hole,
    // Stops reading both sides: bytes pile up in the kernel's buffers, nothing is closed
    // (a peer that vanished without a FIN, a half-open connection).
    stall,
    // Forwards server bytes one per write, each its own TCP segment.
    slice,
    // Forwards the first half of the next server bytes, then resets the client's connection
    // (RST); every later connection is reset the same way while the fault lasts.
    reset_mid_reply,
  };

  explicit fault_relay(std::uint16_t target_port);
  ~fault_relay();
  fault_relay(const fault_relay&) = delete;
  fault_relay& operator=(const fault_relay&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  void set_fault(fault f) { fault_.store(f); }
  // Holds every server→client byte this long before forwarding it (0: none).
  void set_latency(std::chrono::milliseconds d) { latency_ms_.store(d.count()); }
  // Connections accepted so far (a client reconnecting shows here).
  int accepted() const { return accepted_.load(); }

 private:
  void run();

  std::uint16_t target_port_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: the destructor's stop signal
  std::atomic<fault> fault_{fault::none};
  std::atomic<long long> latency_ms_{0};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace floodgate::test
