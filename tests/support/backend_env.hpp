// Where a backend-agnostic suite gets its backends: the same tests run against the memory
// backend (tests/unit) and against a real Redis (tests/integration).
#pragma once

#include <memory>
#include <string>

#include "floodgate/backend.hpp"
#include "floodgate/options.hpp"

namespace floodgate::test {

class backend_env {
 public:
  virtual ~backend_env() = default;
  // A fresh backend reading time from `clock`, with no state left from earlier tests.
  virtual std::shared_ptr<backend> make(clock_fn clock) = 0;
  virtual std::string name() const = 0;
};

class memory_env final : public backend_env {
 public:
  std::shared_ptr<backend> make(clock_fn clock) override;
  std::string name() const override { return "memory"; }
};

}  // namespace floodgate::test
