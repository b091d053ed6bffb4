#include "options.hpp"

#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <string_view>

#include "floodgate/errors.hpp"
#include "key_distribution.hpp"
#include "traffic_model.hpp"

namespace floodgate::bench {
namespace {

// floodgated's streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS): more would wait.
constexpr std::size_t max_h2_streams = 100;

template <class T>
T parse_integer(std::string_view flag, std::string_view text, T min, T max) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < min || value > max)
    throw usage_error(std::string(flag) + ": expected an integer in [" + std::to_string(min) +
                      ", " + std::to_string(max) + "], got '" + std::string(text) + "'");
  return value;
}

std::chrono::milliseconds parse_duration_flag(std::string_view flag, std::string_view text) {
  auto d = parse_duration(text);
  if (!d || d->count() < 1)
    throw usage_error(std::string(flag) + ": expected a duration such as 500ms, 5s or 2m, got '" +
                      std::string(text) + "'");
  return *d;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  static const std::pair<std::string_view, double> units[] = {
      {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}};
  double scale = 1000;                      // a bare number is seconds
  for (const auto& [suffix, ms] : units) {  // "ms" before "s": "5ms" is not 5 m-seconds
    if (text.ends_with(suffix)) {
      text.remove_suffix(suffix.size());
      scale = ms;
      break;
    }
  }
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !(value >= 0) ||
      value * scale > 1e12)
    return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(value * scale)));
}

concurrency_policy bench_options::make_concurrency_policy() const {
  try {
    return concurrency_policy(rule, limit, lease, failure_mode::closed);
  } catch (const config_error& e) {
    throw usage_error(std::string("concurrency policy: ") + e.what());
  }
}

policy bench_options::make_policy() const {
  try {
    const policy p(rule, algo, limit, window, burst_size, failure_mode::closed);
    if (reserve == 0) return p;
    return p.with_reserve(reserve,
                          reserve_for.value_or(std::min(window, std::chrono::milliseconds{1000})));
  } catch (const config_error& e) {
    throw usage_error(std::string("policy: ") + e.what());
  }
}

bench_options parse_options(int argc, const char* const* argv) {
  bench_options o;
  bool naive = false, duration_given = false, algorithm_given = false, arrivals_given = false,
       limit_given = false, hold_given = false, lease_given = false, cost_given = false,
       window_given = false, burst_size_given = false;
  std::optional<std::string> redis_url, http_url, grpc_address;

  using setter = std::function<void(std::string_view)>;
  const std::map<std::string_view, setter> with_value = {
      {"--redis", [&](std::string_view v) { redis_url = std::string(v); }},
      {"--http", [&](std::string_view v) { http_url = std::string(v); }},
      {"--grpc", [&](std::string_view v) { grpc_address = std::string(v); }},
      {"--domain", [&](std::string_view v) { o.domain = std::string(v); }},
      {"--rule", [&](std::string_view v) { o.rule = std::string(v); }},
      {"--processes",
       [&](std::string_view v) {
         o.processes = parse_integer<std::size_t>("--processes", v, 1, 256);
       }},
      {"--threads",
       [&](std::string_view v) {
         o.threads = parse_integer<std::size_t>("--threads", v, 1, 1024);
       }},
      {"--inflight",
       [&](std::string_view v) {
         o.inflight = parse_integer<std::size_t>("--inflight", v, 1, 4096);
       }},
      {"--h2-streams",
       [&](std::string_view v) {
         o.h2_streams = parse_integer<std::size_t>("--h2-streams", v, 1, max_h2_streams);
       }},
      {"--keys",
       [&](std::string_view v) {
         o.keys = parse_integer<std::size_t>("--keys", v, 1, 10'000'000);
       }},
      {"--zipf",
       [&](std::string_view v) {
         double s = -1;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
         if (ec != std::errc{} || end != v.data() + v.size() || !(s > 0) || s > 10)
           throw usage_error("--zipf: expected an exponent in (0, 10], got '" + std::string(v) +
                             "'");
         o.zipf = s;
       }},
      {"--rate",
       [&](std::string_view v) {
         double r = -1;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), r);
         if (ec != std::errc{} || end != v.data() + v.size() || !(r > 0) || r > 1e8)
           throw usage_error("--rate: expected decisions per second in (0, 1e8], got '" +
                             std::string(v) + "'");
         o.rate = r;
       }},
      {"--arrivals",
       [&](std::string_view v) {
         if (v == "constant")
           o.arrivals = arrivals::constant;
         else if (v == "poisson")
           o.arrivals = arrivals::poisson;
         else
           throw usage_error("--arrivals: expected constant or poisson, got '" + std::string(v) +
                             "'");
         arrivals_given = true;
       }},
      {"--over-limit-share",
       [&](std::string_view v) {
         double f = -1;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), f);
         if (ec != std::errc{} || end != v.data() + v.size() || !(f >= 0) || f > 1)
           throw usage_error("--over-limit-share: expected a fraction in [0, 1], got '" +
                             std::string(v) + "'");
         o.over_limit_share = f;
       }},
      {"--replay-max",
       [&](std::string_view v) {
         o.replay_max = parse_integer<std::size_t>("--replay-max", v, 1, 100'000'000);
       }},
      {"--max-lag", [&](std::string_view v) { o.max_lag = parse_duration_flag("--max-lag", v); }},
      {"--duration",
       [&](std::string_view v) {
         o.duration = parse_duration_flag("--duration", v);
         duration_given = true;
       }},
      {"--burst",
       [&](std::string_view v) {
         o.burst = parse_integer<std::uint64_t>("--burst", v, 1, 10'000'000);
       }},
      {"--seed",
       [&](std::string_view v) {
         o.seed = parse_integer<std::uint64_t>("--seed", v, 0, UINT64_MAX);
       }},
      {"--algorithm",
       [&](std::string_view v) {
         algorithm_given = true;
         if (v == "concurrency") {
           o.concurrency = true;
           return;
         }
         o.concurrency = false;
         auto a = parse_algorithm(v);
         if (!a)
           throw usage_error(
               "--algorithm: expected sliding_log, sliding_window, fixed_window, "
               "token_bucket, gcra or concurrency, got '" +
               std::string(v) + "'");
         o.algo = *a;
       }},
      {"--limit",
       [&](std::string_view v) {
         o.limit = parse_integer<std::int64_t>("--limit", v, 1, INT64_MAX);
         limit_given = true;
       }},
      {"--window",
       [&](std::string_view v) {
         o.window = parse_duration_flag("--window", v);
         window_given = true;
       }},
      {"--burst-size",
       [&](std::string_view v) {
         o.burst_size = parse_integer<std::int64_t>("--burst-size", v, 1, INT64_MAX);
         burst_size_given = true;
       }},
      {"--reserve",
       [&](std::string_view v) {
         o.reserve = parse_integer<std::int64_t>("--reserve", v, 1, INT64_MAX);
       }},
      {"--reserve-for",
       [&](std::string_view v) { o.reserve_for = parse_duration_flag("--reserve-for", v); }},
      {"--cost",
       [&](std::string_view v) {
         o.cost = parse_integer<std::int64_t>("--cost", v, 1, INT64_MAX);
         cost_given = true;
       }},
      {"--hold",
       [&](std::string_view v) {
         // 0 releases at once; at most an hour (a run of held leases, not a soak test).
         auto d = parse_duration(v);
         if (!d || *d > std::chrono::hours(1))
           throw usage_error(
               "--hold: expected a duration in [0, 1h] such as 0ms, 10ms or 1s, got '" +
               std::string(v) + "'");
         o.hold = *d;
         hold_given = true;
       }},
      {"--lease",
       [&](std::string_view v) {
         o.lease = parse_duration_flag("--lease", v);
         lease_given = true;
       }},
      {"--connections",
       [&](std::string_view v) {
         o.connections = parse_integer<std::size_t>("--connections", v, 1, 256);
       }},
      {"--timeout", [&](std::string_view v) { o.timeout = parse_duration_flag("--timeout", v); }},
      {"--clock-tolerance",
       [&](std::string_view v) {
         auto d = parse_duration(v);
         if (!d)
           throw usage_error("--clock-tolerance: expected a duration such as 0ms or 5ms, got '" +
                             std::string(v) + "'");
         o.clock_tolerance = *d;
       }},
      {"--print-script",
       [&](std::string_view v) {
         auto a = parse_algorithm(v);
         if (!a) throw usage_error("--print-script: unknown algorithm '" + std::string(v) + "'");
         o.print_script = a;
       }},
  };

  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::optional<std::string_view> inline_value;
    if (auto eq = arg.find('='); starts_with(arg, "--") && eq != std::string_view::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg == "--naive") {
      naive = true;
      continue;
    }
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    if (arg == "--replay") {
      o.replay = true;
      continue;
    }
    if (arg == "--no-progress") {
      o.progress = false;
      continue;
    }
    if (arg == "--print-library") {
      o.print_library = true;
      continue;
    }
    auto it = with_value.find(arg);
    if (it == with_value.end())
      throw usage_error("unknown argument '" + std::string(argv[i]) + "' (see --help)");
    if (!inline_value) {
      if (i + 1 >= argc) throw usage_error(std::string(arg) + " needs a value (see --help)");
      inline_value = argv[++i];
    }
    it->second(*inline_value);
  }
  if (o.help || o.print_script || o.print_library) return o;

  if (int{redis_url.has_value()} + int{http_url.has_value()} + int{grpc_address.has_value()} > 1)
    throw usage_error("give one target: --redis URL, --http URL or --grpc HOST:PORT");
  if (!redis_url && !http_url && !grpc_address)
    throw usage_error(
        "no target: give --redis URL (redis:// or memory://), --http URL or --grpc HOST:PORT");
  if (grpc_address) {
    if (grpc_address->find("://") != std::string::npos ||
        grpc_address->rfind(':') == std::string::npos)
      throw usage_error("--grpc: expected HOST:PORT, got '" + *grpc_address + "'");
    if (naive) throw usage_error("--naive runs on Redis directly: use it with --redis URL");
    o.target = target_kind::grpc;
    o.url = *grpc_address;
  } else if (http_url) {
    if (!starts_with(*http_url, "http://"))
      throw usage_error("--http: expected http://HOST:PORT, got '" + *http_url + "'");
    if (naive)
      throw usage_error("--naive runs on Redis directly: use it with --redis URL, not --http");
    o.target = target_kind::http;
    o.url = *http_url;
  } else {
    o.url = *redis_url;
    const bool memory = starts_with(o.url, "memory:") || o.url == "memory";
    // redis://, redis+cluster://, ...: make_backend() knows which it supports.
    if (!memory && !starts_with(o.url, "redis"))
      throw usage_error("--redis: expected redis://HOST:PORT[/DB] or memory://, got '" + o.url +
                        "'");
    if (memory && o.processes > 1)
      throw usage_error("--redis memory:// keeps state in one process: --processes must be 1");
    if (naive) {
      if (!starts_with(o.url, "redis://"))
        throw usage_error("--naive needs one plain Redis: give --redis redis://HOST:PORT");
      if (algorithm_given && o.algo != algorithm::fixed_window)
        throw usage_error(
            "--naive implements fixed_window only (drop --algorithm or use fixed_window)");
      o.algo = algorithm::fixed_window;
      o.target = target_kind::naive;
    }
  }
  if (o.h2_streams > 1) {
    if (o.target != target_kind::grpc) throw usage_error("--h2-streams is for --grpc HOST:PORT");
    if (o.inflight > 1)
      throw usage_error("--h2-streams sets the calls in flight per thread: drop --inflight");
    o.inflight = o.h2_streams;
  } else if (o.inflight > 1 && o.target != target_kind::library) {
    throw usage_error(
        "--inflight > 1 needs the library target (--redis without --naive); for --grpc, give "
        "--h2-streams N");
  }
  if (o.burst && duration_given) throw usage_error("give --duration or --burst, not both");
  if (o.zipf > 0 && o.keys == 1) throw usage_error("--zipf needs --keys > 1");
  if (o.rate && o.burst) throw usage_error("--rate sends on a schedule: give --duration, not --burst");
  if (arrivals_given && !o.rate) throw usage_error("--arrivals needs --rate (open loop)");
  if (o.replay && o.target != target_kind::library)
    throw usage_error(
        "--replay needs the decision times, which only the library target knows (--redis "
        "without --naive)");
  if (o.over_limit_share) {
    if (!o.rate) throw usage_error("--over-limit-share needs --rate: it sets each key's load");
    if (o.keys < 2) throw usage_error("--over-limit-share needs --keys > 1 (and --zipf to vary)");
    if (limit_given) throw usage_error("--over-limit-share sets the limit: drop --limit");
    const key_distribution d(o.keys, o.zipf);
    o.limit = limit_for_over_limit_share(per_key_load(d, *o.rate, o.cost, o.window), d,
                                         *o.over_limit_share, o.cost);
  }

  if ((hold_given || lease_given) && !o.concurrency)
    throw usage_error("--hold and --lease are for --algorithm concurrency");
  if (o.concurrency) {
    if (o.target != target_kind::library)
      throw usage_error(
          "--algorithm concurrency needs the library target (--redis URL without --naive)");
    if (o.rate) throw usage_error("--algorithm concurrency runs closed loop: drop --rate");
    if (o.inflight > 1)
      throw usage_error(
          "--algorithm concurrency: each thread holds one lease at a time, drop --inflight");
    if (o.replay)
      throw usage_error("--replay replays rate decisions: not with --algorithm concurrency");
    if (cost_given || window_given || burst_size_given)
      throw usage_error(
          "--algorithm concurrency takes --limit (holders at once), --lease and --hold, not "
          "--cost, --window or --burst-size");
    // The shared board of holders keeps 16 bytes per key in memory shared by the processes.
    if (o.keys > 1'000'000) throw usage_error("--algorithm concurrency: --keys at most 1000000");
    // A lease that expires while held would count as held after Redis let it go: the observed
    // holders could then exceed the limit without a bug.
    if (o.lease <= o.hold)
      throw usage_error(
          "--lease must be longer than --hold: a lease that expires while held "
          "makes the holders count meaningless");
    o.make_concurrency_policy();  // validates limit and lease
    return o;
  }
  if (o.reserve_for && o.reserve == 0) throw usage_error("--reserve-for needs --reserve");
  if (o.reserve > 0 && o.target != target_kind::library)
    throw usage_error(
        "--reserve is for the library target (--redis URL without --naive); for floodgated, "
        "give its rule 'reserve:' in the rules file");
  const auto p = o.make_policy();  // validates limit, window, burst size, reserve
  if (o.cost > p.capacity())
    throw usage_error("--cost " + std::to_string(o.cost) + " exceeds the policy's capacity " +
                      std::to_string(p.capacity()) + ": every request would be refused");
  return o;
}

std::string usage() {
  return R"(floodgate-bench: load and accuracy tool for floodgate

Usage: floodgate-bench TARGET [LOAD] [POLICY] [OUTPUT]

Target (one):
  --redis URL            floodgate::limiter in-process on any backend URL it takes
                         (redis://HOST:PORT[/DB], redis+cluster://..., memory://)
  --redis URL --naive    a deliberately non-atomic GET-then-SET fixed window on that Redis,
                         to watch the read-modify-write race over-admit (not floodgate)
  --http URL             a running floodgated (POST /v1/check); --rule NAME picks its rule
  --grpc HOST:PORT       a running floodgated's Envoy rate limit service (ShouldRateLimit):
                         one descriptor [{key: RULE, value: KEY}] in --domain D (default
                         bench), hits_addend = cost
Load:
  --processes P          separate OS processes, like app servers (default 1)
  --threads T            threads per process (default 4)
  --inflight N           calls in flight per thread, library target only (default 1)
  --h2-streams N         --grpc: N calls in flight on each thread's one HTTP/2 connection,
                         multiplexed as Envoy sends them (default 1; at most 100, floodgated's
                         streams per connection)
  --keys K               distinct keys (default 1)
  --zipf S               skewed keys: P(key k) ∝ 1/(k+1)^S (default: uniform)
  --duration D           run for D: 500ms, 5s, 2m (default 5s)
  --burst N              instead: every thread fires N requests, all starting at one instant
  --seed N               key choice and arrival seed (default 1)
Open loop (default: closed loop, each call waits for the previous answer):
  --rate R               send R decisions/s in all, split evenly over processes x threads,
                         on schedule whether or not earlier answers have arrived; latency is
                         also measured from each request's intended send time (corrected)
  --arrivals A           constant (evenly spaced, default) or poisson (exponential gaps)
  --inflight N           (above) is then each thread's bound on calls in flight: a request
                         due while N are in flight waits for a slot, late
  --max-lag D            a request not sent by D after its intended time (waiting for a
                         slot, or the sender running late) is dropped and counted
                         (default 1s)
  --over-limit-share F   derive --limit so that a share F of the requests comes from keys
                         whose load (their share of R x cost per window) is over it: with
                         --zipf, a few keys far over, some near, most well under. The share
                         got (the key shares come in steps) is reported as traffic.
Policy (for --http and --grpc, describe the service's rule: the accuracy check uses it):
  --algorithm A          sliding_log, sliding_window, fixed_window, token_bucket, gcra,
                         concurrency (below) (default gcra; fixed_window with --naive)
  --limit L              requests per window (default 100)
  --window W             default 1s
  --burst-size B         token_bucket and gcra only (default: L)
  --cost C               cost of each request (default 1)
  --reserve N            each process reserves up to N units of a key's quota in one backend
                         call and admits from them with none (policy::with_reserve;
                         every algorithm; library target)
  --reserve-for D        how long a grant may be spent (default 1s, or the window if shorter)
Concurrency (--algorithm concurrency, library target, closed loop): each thread acquires
a lease on a key (floodgate::semaphore), holds it, releases it, and goes on; a refused
acquire is retried at once. Reports acquires/s and their latency, grants, refusals,
leases lost (expired before their release) and the most leases held at once per key as
the bench saw them (from the acquire's reply to the release's send, across every process
and thread): more than --limit is a bug.
  --limit L              holders at once per key (default 100)
  --hold D               how long each lease is held (default 10ms; 0 releases at once)
  --lease D              the lease's TTL, longer than --hold (default 30s)
Backend (redis://):
  --connections N        connections per process (redis_options::connections, default 2)
  --timeout D            per-call deadline (default 1s)
Wrong decisions (library target):
  --replay               record every decision (key, cost, verdict, the ms it was decided
                         at) and replay it through sliding_log's exact definition against
                         the run's own admitted history: wrongly admitted / denied, and the
                         over-admission per key-window. The bench gives the backend its clock
                         to know each decision's ms exactly: on Redis the scripts then take
                         "now" from this host's clock, read when the call is sent, instead of
                         Redis's TIME (redis_options::test_clock; same machine clock here)
  --replay-max N         decisions recorded at most, 24 bytes each (default 2000000); past
                         it the rest of the run is reported as unjudged
Output:
  --json                 one JSON object on stdout, nothing else
  --no-progress          no progress bar (it is shown only when stdout is a terminal)
  --clock-tolerance D    clock difference allowed between this host and Redis (default 1ms)
  --print-script ALGO    print the Lua script floodgate runs for ALGO, and exit
  --print-library        print the function library floodgate loads (FUNCTION LOAD; its
                         functions are <name>_<algorithm>, <name>_batch, ...), and exit
  -h, --help

over_admitted counts the admitted cost that the algorithm's definition (docs/algorithms.md)
would have refused, judged from each admitted request's own [send, receive] time interval,
widened by the clock tolerance; sliding_window is judged against the exact sliding bound,
so its figure is the approximation's error.
)";
}

}  // namespace floodgate::bench
