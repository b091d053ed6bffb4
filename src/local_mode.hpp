// Local mode (failure_mode::local): while the backend cannot answer, a limiter decides such
// policies in its own memory at limit ÷ N, N being the instances sharing the backend. With N
// instances each admitting at most limit ÷ N (rounded down) per window, the instances together
// admit at most the limit during an outage (docs/algorithms.md, "Local mode").
//
// An outage is entered on a backend failure and lasts probe_interval; local-mode checks then
// skip the backend (an outage costs one deadline, not one per request) until one probe finds
// it answering again: only the probe's answer ends an outage. The local state outlives the
// outage (until its windows end), so the local share is handed out once per window, however
// many outages the window sees.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "floodgate/backend.hpp"
#include "floodgate/options.hpp"

namespace floodgate::memory {
class memory_backend;
}

namespace floodgate::detail {

class local_mode {
 public:
  local_mode(std::shared_ptr<backend> b, const limiter_options& options);
  ~local_mode();
  local_mode(const local_mode&) = delete;
  local_mode& operator=(const local_mode&) = delete;

  // What decides the next local-mode check. Starts the heartbeats on first use, so N is known
  // before an outage.
  enum class route {
    backend,  // no outage: ask the backend
    probe,    // an outage whose interval passed: this call asks the backend for everyone
    local,    // an outage: decide locally
  };
  route route_now();
  // The backend answered (the probe's answer ends an outage; others change nothing) or failed
  // with `why` (starts or extends one). A call answered without the backend (a local denial)
  // is neither.
  void answered(route r);
  void failed(route r, std::error_code why);
  // The call was refused before it reached the backend (cross_slot): it says nothing of the
  // backend, and a probe hands its turn to the next call.
  void not_asked(route r);
  // The failure that started or last extended the outage.
  std::error_code last_failure() const noexcept;

  // Decides `items` all-or-nothing in this process at limit ÷ N.
  backend_reply decide(std::span<const check_item> items);

  // Starts the heartbeats (no-op with a fixed instance count or once started).
  void start_heartbeats();

  std::int64_t instances() const noexcept { return instances_.load(std::memory_order_relaxed); }
  bool in_outage() const noexcept { return outage_.load(std::memory_order_relaxed); }
  std::uint64_t decisions() const noexcept { return decisions_.load(std::memory_order_relaxed); }

 private:
  std::int64_t now_ms() const;
  void heartbeat_loop();
  // The policy `p` scaled to n instances (null: limit ÷ n is 0), cached.
  const policy* scaled(const policy& p, std::int64_t n);

  std::shared_ptr<backend> backend_;
  const limiter_options options_;
  const std::string instance_id_;

  std::atomic<bool> outage_{false};
  std::atomic<std::int64_t> outage_until_{0};
  std::atomic<bool> probe_in_flight_{false};
  std::atomic<std::int64_t> instances_{1};
  std::atomic<std::uint64_t> decisions_{0};
  std::atomic<int> last_failure_{0};  // an errc

  std::mutex mutex_;  // the local state and the scaled policies
  std::shared_ptr<memory::memory_backend> local_;  // null until the first outage
  std::map<std::string, std::unique_ptr<policy>> scaled_;

  std::once_flag heartbeat_started_;
  std::atomic<bool> heartbeats_on_{false};
  std::mutex stop_mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

}  // namespace floodgate::detail
