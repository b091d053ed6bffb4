// The parent: forks --processes worker processes (simulated app servers), gives them one
// start instant once all are connected, shows progress, and adds their results up.
//
// Workers die with the parent (PR_SET_PDEATHSIG) and are always reaped; a worker's failure,
// or SIGINT/SIGTERM, stops them all. Call it before this process starts any thread: fork
// copies only the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>

#include "held_board.hpp"
#include "options.hpp"
#include "run_result.hpp"

namespace floodgate::bench {

// Raised when SIGINT or SIGTERM stopped the run (exit code 130).
class interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// fraction: how far the run is (0..1), decisions: answered so far across all workers.
using progress_fn = std::function<void(double fraction, std::uint64_t decisions)>;

// Throws std::runtime_error naming the worker that failed and why, or interrupted.
// `held`: --algorithm concurrency's board of leases held, shared with the workers (else null).
run_result supervise(const bench_options& opts, const progress_fn& progress,
                     held_board* held = nullptr);

}  // namespace floodgate::bench
