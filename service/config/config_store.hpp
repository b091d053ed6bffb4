// The configuration in force, swapped whole on reload. A request takes a snapshot once and
// keeps it (and so its policies) alive until its response is written, whatever reloads
// happen meanwhile.
#pragma once

#include <atomic>
#include <memory>

#include "config/config.hpp"

namespace floodgate::service {

class config_store {
 public:
  explicit config_store(std::shared_ptr<const config> initial) : current_(std::move(initial)) {}

  std::shared_ptr<const config> get() const noexcept { return current_.load(); }
  void set(std::shared_ptr<const config> next) noexcept { current_.store(std::move(next)); }

 private:
  std::atomic<std::shared_ptr<const config>> current_;
};

}  // namespace floodgate::service
