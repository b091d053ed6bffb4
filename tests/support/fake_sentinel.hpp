// A sentinel that says what the test tells it (on fake_redis): SENTINEL MASTER with a
// config-epoch, get-master-addr-by-name, SUBSCRIBE confirmed. For the sentinels' disagreements
// a real set-up will not produce on demand (tests/integration/sentinel_epoch_test.cpp).
//
//   fake_sentinel stale{old_primary.port(), 1}, told{new_primary.port(), 2};
//   limiter l{sentinel_url_of({&stale, &told})};            // redis+sentinel://.../fg
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "fake_redis.hpp"

namespace floodgate::test {

inline std::string resp_bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

// A sentinel whose view of master "fg" is whatever the test sets: (port, epoch).
class fake_sentinel {
 public:
  fake_sentinel(std::uint16_t port, std::uint64_t epoch, bool master_allowed = true)
      : port_(port), epoch_(epoch), master_allowed_(master_allowed) {}

  void name(std::uint16_t port, std::uint64_t epoch) {
    port_ = port;
    epoch_ = epoch;
  }
  std::uint16_t port() const { return fake_.port(); }
  std::vector<fake_redis::command> commands() const { return fake_.commands(); }

 private:
  std::string answer(const fake_redis::command& c) {
    if (c.size() == 3 && c[0] == "SUBSCRIBE")
      return "*3\r\n" + resp_bulk("subscribe") + resp_bulk(c[1]) + ":1\r\n*3\r\n" + resp_bulk("subscribe") +
             resp_bulk(c[2]) + ":2\r\n";
    if (c.size() == 3 && c[0] == "SENTINEL" && c[1] == "get-master-addr-by-name")
      return "*2\r\n" + resp_bulk("127.0.0.1") + resp_bulk(std::to_string(port_.load()));
    if (c.size() == 3 && c[0] == "SENTINEL" && c[1] == "MASTER") {
      if (!master_allowed_)
        return "-NOPERM User default has no permissions to run the 'sentinel|master' "
               "command\r\n";
      return "*10\r\n" + resp_bulk("name") + resp_bulk("fg") + resp_bulk("ip") + resp_bulk("127.0.0.1") +
             resp_bulk("port") + resp_bulk(std::to_string(port_.load())) + resp_bulk("flags") +
             resp_bulk("master") + resp_bulk("config-epoch") + resp_bulk(std::to_string(epoch_.load()));
    }
    return "-ERR unexpected\r\n";
  }

  std::atomic<std::uint16_t> port_;
  std::atomic<std::uint64_t> epoch_;
  const bool master_allowed_;
  fake_redis fake_{[this](const fake_redis::command& c) { return answer(c); }};
};

inline std::string sentinel_url_of(std::initializer_list<const fake_sentinel*> sentinels) {
  std::string url = "redis+sentinel://";
  for (const auto* s : sentinels)
    url += (url.back() == '/' ? "" : ",") + std::string("127.0.0.1:") + std::to_string(s->port());
  return url + "/fg";
}

}  // namespace floodgate::test
