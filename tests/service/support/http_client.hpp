// A small blocking HTTP/1.1 client over POSIX sockets, for talking to floodgated and nginx in
// tests. Deliberately not Beast: it must be able to send broken requests, and the tests
// should not pay Beast's compile time.
//
//   http_connection c(port);
//   auto r = c.request("POST", "/v1/check", R"({"rule":"api","key":"a"})");
//   EXPECT_EQ(r.status, 200);
//   c.send_raw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");  auto r2 = c.read_reply();
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace floodgate::test {

struct http_reply {
  int status = 0;  // 0: no reply (connection closed or timed out)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  std::optional<std::string> header(std::string_view name) const;
};

class http_connection {
 public:
  explicit http_connection(std::uint16_t port,
                           std::chrono::milliseconds timeout = std::chrono::seconds(5))
      : http_connection(port, "127.0.0.1", timeout) {}
  // From a given loopback source address (any of 127.0.0.0/8 on Linux): how a test plays
  // several clients, each with an address of its own.
  http_connection(std::uint16_t port, const std::string& source_address,
                  std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~http_connection();
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;

  // Sends a well-formed request (Host and Content-Length added) and reads the reply.
  http_reply request(std::string_view method, std::string_view target, std::string_view body = {},
                     const std::vector<std::pair<std::string, std::string>>& headers = {});

  // Sends bytes as they are; false if the peer is gone.
  bool send_raw(std::string_view bytes);
  // Reads one reply (status 0 if the connection closes or times out first). A reply to HEAD
  // has no body, whatever its Content-Length says.
  http_reply read_reply(bool to_head = false);
  // Waits up to `within` for the peer to close; true if it did (EOF or reset).
  bool closed_by_peer(std::chrono::milliseconds within);

 private:
  bool fill();  // reads more into buffer_; false on EOF, error or timeout

  int fd_ = -1;
  std::string buffer_;
};

// One request on a fresh connection.
http_reply http_request_once(std::uint16_t port, std::string_view method, std::string_view target,
                             std::string_view body = {},
                             const std::vector<std::pair<std::string, std::string>>& headers = {});

}  // namespace floodgate::test
