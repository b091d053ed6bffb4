// floodgate/redis_call.hpp: one command to the node that holds a key (url_asker.hpp, as the
// inspection API asks).
#include <memory>
#include <string>
#include <vector>

#include "floodgate/redis_call.hpp"
#include "redis/url_asker.hpp"

namespace floodgate {
struct redis_caller::impl : redis::url_asker {
  using url_asker::url_asker;
};

redis_caller::redis_caller(std::string_view url, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(url, timeout)) {}

redis_caller::~redis_caller() = default;

const std::string& redis_caller::why_not() const noexcept {
  return impl_->why_not();
}

const std::string& redis_caller::key_prefix() const noexcept {
  return impl_->options().key_prefix;
}

// A key reader per call: a Cluster's slot is found again (MOVED from the first seed), the
// Sentinel primary asked again, so a failover is followed at the next call.
redis_answer redis_caller::call(std::string_view, const std::vector<std::string>& command) {
  auto& u = *impl_;
  redis_answer out;
  if (!u.why_not().empty()) {
    out.error = u.why_not();
    return out;
  }
  if (!u.find_nodes(out.error)) return out;
  redis::url_asker::key_reader k(u);
  auto r = k.run(command, out.error);
  out.node = k.node_name();
  if (r) out.value = std::move(*r);
  return out;
}

void redis_caller::stop() {
  impl_->stop();
}

}  // namespace floodgate
