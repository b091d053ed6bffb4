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

class redis_server;

// A real redis-server, started on first use and shared by every test of the binary (tests
// keep apart by unique policy names and keys). The clock reaches the scripts as now_ms.
class redis_env final : public backend_env {
 public:
  redis_env();
  ~redis_env() override;
  std::shared_ptr<backend> make(clock_fn clock) override;
  std::string name() const override { return "redis"; }

 private:
  std::unique_ptr<redis_server> server_;
};

}  // namespace floodgate::test
