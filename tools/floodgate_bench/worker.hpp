// One worker process: --threads threads sending the load to one target, started at the instant
// the parent names, reporting to the parent over pipes (see channel.hpp).
//
// Protocol: build the target, warm every thread's connection up with a peek (cost 0, consumes
// nothing), send `ready`; wait for `start`; run; send `progress` every 100 ms and one `result`
// (or one `failure` with a message, at any point). Returns the process's exit code.
#pragma once

#include <cstddef>
#include <string>

#include "held_board.hpp"
#include "options.hpp"

namespace floodgate::bench {

// The key every process uses for key index k in a run.
std::string key_name(const std::string& run_id, std::size_t k);

// `held`: with --algorithm concurrency, the board shared with the parent (held_board.hpp).
int run_worker_process(const bench_options& opts, std::size_t index, const std::string& run_id,
                       int up_fd, int down_fd, held_board* held = nullptr);

}  // namespace floodgate::bench
