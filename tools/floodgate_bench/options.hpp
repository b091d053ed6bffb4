// floodgate-bench's command line: what to load, how hard, and with which policy.
//
//   auto opts = floodgate::bench::parse_options(argc, argv);   // throws usage_error
//   if (opts.help) { std::cout << floodgate::bench::usage(); return 0; }
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "floodgate/policy.hpp"
#include "floodgate/semaphore.hpp"

namespace floodgate::bench {

// A bad command line: the message says which flag and why; main prints it and exits 2.
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// How an open-loop run spaces its requests (--arrivals).
enum class arrivals {
  constant,  // evenly: one every 1/rate
  poisson,   // independent exponential gaps of mean 1/rate, as many independent users make
};

enum class target_kind {
  library,  // floodgate::limiter in-process, on --redis URL (redis:// or memory://)
  naive,    // the non-atomic GET-then-SET fixed window on --redis URL (hiredis, not floodgate)
  http,     // a running floodgated at --http URL
  grpc,     // a running floodgated's Envoy rate limit service at --grpc HOST:PORT
};

struct bench_options {
  bool help = false;
  std::optional<algorithm> print_script;  // --print-script ALGO: print the Lua source and exit
  bool print_library = false;  // --print-library: print the function library's source and exit

  target_kind target = target_kind::library;
  std::string url;             // --redis, --http or --grpc (HOST:PORT)
  std::string domain = "bench";  // --domain: the Envoy domain (grpc)
  std::string rule = "bench";  // --rule: the floodgated rule (http), descriptor key (grpc),
                               // the policy name otherwise

  // Load shape.
  std::size_t processes = 1;
  std::size_t threads = 4;   // per process
  std::size_t inflight = 1;  // calls in flight per thread (library target; --grpc: h2_streams)
  // --h2-streams (--grpc): calls in flight on each thread's one HTTP/2 connection, multiplexed
  // as Envoy sends them; sets inflight too.
  std::size_t h2_streams = 1;
  std::size_t keys = 1;
  double zipf = 0;  // 0: uniform; else P(key k) ∝ 1/(k+1)^zipf
  std::chrono::milliseconds duration{5000};
  std::optional<std::uint64_t> burst;  // requests per thread, all started at one instant
  std::uint64_t seed = 1;
  // Open loop (--rate): decisions per second across the run, sent on schedule whether or not
  // earlier answers have arrived; unset: closed loop (each call waits for the previous answer).
  std::optional<double> rate;
  floodgate::bench::arrivals arrivals = arrivals::constant;
  // Open loop: a request that has waited this long past its intended send time for one of the
  // worker's --inflight slots is dropped (and counted), so a dead target cannot make the
  // schedule's backlog grow without bound.
  std::chrono::milliseconds max_lag{1000};
  // Open loop: the share of requests to come from keys whose offered load is over the limit;
  // --limit is then derived from it (traffic_model.hpp).
  std::optional<double> over_limit_share;

  // The policy (for --http it must describe the service's rule: the accuracy check uses it).
  algorithm algo = algorithm::gcra;
  std::int64_t limit = 100;
  std::chrono::milliseconds window{1000};
  std::optional<std::int64_t> burst_size;
  std::int64_t cost = 1;
  // Reservations (policy::with_reserve, library target): units each process reserves at
  // most at once (0: off), and how long a grant may be spent (default 1 s or the window).
  std::int64_t reserve = 0;
  std::optional<std::chrono::milliseconds> reserve_for;

  // --algorithm concurrency: each request acquires a lease of --limit concurrent holders per
  // key, holds it for `hold` (the simulated work), then releases it; `lease` is its TTL.
  bool concurrency = false;
  std::chrono::milliseconds hold{10};
  std::chrono::milliseconds lease{30'000};

  // Backend knobs (library target on redis://).
  std::size_t connections = 2;
  std::chrono::milliseconds timeout{1000};

  // The clock difference allowed between this host and the one deciding (Redis's TIME).
  std::chrono::milliseconds clock_tolerance{1};

  // --replay: record every decision (key, cost, verdict, the ms it was decided at) and replay
  // them through sliding_log's definition (replay.hpp). At most replay_max are kept in all
  // (24 bytes each), split evenly over the threads; past a thread's share the run is judged
  // up to the first decision left out.
  bool replay = false;
  std::size_t replay_max = 2'000'000;

  bool json = false;
  bool progress = true;  // also needs stdout to be a terminal

  bool is_burst() const noexcept { return burst.has_value(); }
  bool is_open_loop() const noexcept { return rate.has_value(); }
  std::size_t workers() const noexcept { return processes * threads; }
  // The policy every worker checks against; throws usage_error if the flags make none.
  policy make_policy() const;
  // --algorithm concurrency: the lease policy (name --rule, --limit, --lease).
  concurrency_policy make_concurrency_policy() const;
};

bench_options parse_options(int argc, const char* const* argv);
std::string usage();

// "250ms", "5s", "2m", "1h", or a bare number of seconds ("5", "0.5").
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace floodgate::bench
