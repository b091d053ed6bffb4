// A TCP server on a free loopback port that speaks just enough RESP to stand in for a Redis
// that misbehaves on purpose: garbage, over-deep replies, replies in one-byte pieces, extra
// replies, refused handshakes, connections closed at once. Real Redis is used everywhere
// else; this exists only for failures a real server will not produce on demand.
//
//   fake_redis fake([](const fake_redis::command& c) -> std::string {
//     if (fake_redis::is_script_load(c)) return fake_redis::sha_reply(c);
//     return "?garbage\r\n";
//   });
//   floodgate::limiter l{fake.url()};
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace floodgate::test {

class fake_redis {
 public:
  using command = std::vector<std::string>;
  // The bytes to send back for one command (empty: send nothing).
  using responder = std::function<std::string(const command&)>;

  struct options {
    bool close_at_once = false;               // accept, then close without reading
    std::chrono::microseconds byte_delay{0};  // send replies a byte at a time, this far apart
    std::string version = "7.0.0";            // what HELLO answers
    bool answer_hello = false;                // true: HELLO goes to the responder too
  };

  explicit fake_redis(responder r) : fake_redis(std::move(r), options{}) {}
  fake_redis(responder r, options o);
  ~fake_redis();
  fake_redis(const fake_redis&) = delete;
  fake_redis& operator=(const fake_redis&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }
  // Every command received so far, in order (all connections).
  std::vector<command> commands() const;

  static bool is_script_load(const command& c);
  // The reply Redis gives to SCRIPT LOAD: the SHA1 of the script (computed elsewhere; any
  // 40 characters will do for the client, which does not check it).
  static std::string sha_reply(const command& c);

 private:
  void accept_loop();
  void serve(int fd);

  responder responder_;
  options options_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::vector<command> commands_;     // guarded by mutex_
  std::vector<int> fds_;              // guarded by mutex_
  std::vector<std::thread> threads_;  // guarded by mutex_
  std::thread acceptor_;
};

}  // namespace floodgate::test
