#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "key_distribution.hpp"
#include "traffic_model.hpp"

namespace floodgate::bench {
namespace {

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + '"';
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

const char* target_name(target_kind k) {
  switch (k) {
    case target_kind::library:
      return "library";
    case target_kind::naive:
      return "naive";
    case target_kind::http:
      return "http";
    case target_kind::grpc:
      return "grpc";
  }
  return "?";
}

// {p50, p90, p99, p999, max, mean, distribution: [[quantile, µs], ...]}
void latency_object(std::ostringstream& o, const histogram& h) {
  o << "{\"p50\":" << h.percentile(0.50) << ",\"p90\":" << h.percentile(0.90)
    << ",\"p99\":" << h.percentile(0.99) << ",\"p999\":" << h.percentile(0.999)
    << ",\"max\":" << h.max() << ",\"mean\":" << number(h.mean()) << ",\"distribution\":[";
  // Enough points to draw the latency distribution (as percentile curves).
  const double qs[] = {0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0};
  for (std::size_t i = 0; i < std::size(qs); ++i)
    o << (i ? "," : "") << "[" << qs[i] << "," << h.percentile(qs[i]) << "]";
  o << "]}";
}

}  // namespace

// Open loop: the traffic's shape against the policy's limit (from the offered rates).
traffic_shape report_shape(const bench_options& opts, const floodgate::policy& p) {
  const key_distribution d(opts.keys, opts.zipf);
  return shape_of(per_key_load(d, *opts.rate, opts.cost, p.window()), d, p.limit());
}

double report::elapsed_s() const {
  return result.finished_us > result.started_us
             ? static_cast<double>(result.finished_us - result.started_us) / 1e6
             : 0.0;
}

double report::decisions_per_sec() const {
  const auto s = elapsed_s();
  return s > 0 ? static_cast<double>(result.decisions()) / s : 0.0;
}

std::int64_t report::max_held() const {
  return held ? held->max_held() : 0;
}

void report::run_fields(std::ostream& o) const {
  if (opts.is_burst())
    o << ",\"burst\":" << *opts.burst;
  else
    o << ",\"duration_ms\":" << opts.duration.count();
  o << ",\"elapsed_s\":" << number(elapsed_s()) << ",\"decisions\":" << result.decisions()
    << ",\"decisions_per_sec\":" << number(decisions_per_sec()) << ",\"allowed\":" << result.allowed
    << ",\"denied\":" << result.denied << ",\"errors\":" << result.errors
    << ",\"started_unix_ms\":" << result.started_us / 1000
    << ",\"finished_unix_ms\":" << result.finished_us / 1000;
}

std::string report::lease_json() const {
  const auto limit = opts.limit;
  std::ostringstream o;
  o << "{\"target\":" << quoted(target_name(opts.target)) << ",\"url\":" << quoted(opts.url)
    << ",\"mode\":" << quoted(opts.is_burst() ? "burst" : "duration")
    << ",\"algorithm\":\"concurrency\",\"limit\":" << limit
    << ",\"lease_ms\":" << opts.lease.count() << ",\"hold_ms\":" << opts.hold.count()
    << ",\"processes\":" << opts.processes << ",\"threads\":" << opts.threads
    << ",\"connections\":" << opts.connections << ",\"keys\":" << opts.keys
    << ",\"zipf\":" << opts.zipf;
  run_fields(o);
  o << ",\"over_admitted\":" << std::max<std::int64_t>(0, max_held() - limit)
    << ",\"leases\":{\"limit\":" << limit << ",\"granted\":" << result.allowed
    << ",\"refused\":" << result.denied << ",\"released\":" << result.released
    << ",\"lost\":" << result.lost << ",\"max_held\":" << max_held()
    << ",\"keys_at_limit\":" << (held ? held->keys_reaching(limit) : 0)
    << ",\"keys_over_limit\":" << (held ? held->keys_reaching(limit + 1) : 0)
    << "},\"latency_us\":";
  latency_object(o, result.latency_us);
  if (!result.first_error.empty()) o << ",\"first_error\":" << quoted(result.first_error);
  o << "}";
  return o.str();
}

std::string report::json() const {
  if (opts.concurrency) return lease_json();
  const auto& h = result.latency_us;
  std::ostringstream o;
  o << "{\"target\":" << quoted(target_name(opts.target)) << ",\"url\":" << quoted(opts.url)
    << ",\"mode\":" << quoted(opts.is_burst() ? "burst" : "duration")
    << ",\"algorithm\":" << quoted(to_string(rule.algo())) << ",\"limit\":" << rule.limit()
    << ",\"window_ms\":" << rule.window().count() << ",\"burst_size\":" << rule.burst()
    << ",\"cost\":" << opts.cost << ",\"reserve\":" << rule.reserve()
    << ",\"reserve_for_ms\":" << rule.reserve_for().count() << ",\"processes\":" << opts.processes
    << ",\"threads\":" << opts.threads << ",\"inflight\":" << opts.inflight
    << ",\"connections\":" << opts.connections << ",\"keys\":" << opts.keys
    << ",\"zipf\":" << opts.zipf;
  run_fields(o);
  o << ",\"reserved\":" << result.reserved << ",\"over_admitted\":" << accuracy.over_admitted
    << ",\"accuracy\":{\"bound\":" << quoted(accuracy.bound)
    << ",\"admitted\":" << accuracy.admitted << ",\"undetermined\":" << accuracy.undetermined
    << ",\"clock_tolerance_ms\":" << opts.clock_tolerance.count();
  if (accuracy.aligned_over_admitted)
    o << ",\"aligned_over_admitted\":" << *accuracy.aligned_over_admitted;
  o << "},\"latency_us\":";
  latency_object(o, h);
  if (opts.is_open_loop()) {
    const auto intended = result.decisions() + result.errors + result.dropped;
    o << ",\"open_loop\":{\"rate\":" << number(*opts.rate) << ",\"arrivals\":"
      << quoted(opts.arrivals == arrivals::poisson ? "poisson" : "constant")
      << ",\"max_lag_ms\":" << opts.max_lag.count() << ",\"intended\":" << intended
      << ",\"sent\":" << result.decisions() + result.errors << ",\"dropped\":" << result.dropped
      << "},\"corrected_latency_us\":";
    latency_object(o, result.corrected_latency_us);
    const auto shape = report_shape(opts, rule);
    o << ",\"traffic\":{\"over_limit_share\":" << shape.over_limit_share
      << ",\"near_limit_share\":" << shape.near_limit_share
      << ",\"keys_over\":" << shape.keys_over;
    if (opts.over_limit_share) o << ",\"requested_over_limit_share\":" << *opts.over_limit_share;
    o << "}";
  }
  if (replayed) {
    const auto& w = *replayed;
    char shares[160];
    std::snprintf(shares, sizeof shares,
                  ",\"wrongly_admitted_share\":%.9f,\"wrongly_denied_share\":%.9f",
                  w.share(w.wrongly_admitted), w.share(w.wrongly_denied));
    o << ",\"wrong_decisions\":{\"reference\":\"sliding_log\",\"recorded\":" << w.recorded << ",\"judged\":" << w.judged << ",\"unjudged\":" << w.unjudged
      << ",\"wrongly_admitted\":" << w.wrongly_admitted
      << ",\"wrongly_denied\":" << w.wrongly_denied << shares
      << ",\"over_admission\":{\"max\":" << w.max_over_admission
      << ",\"mean\":" << w.mean_over_admission << ",\"key_windows\":" << w.key_windows
      << ",\"key_windows_over\":" << w.key_windows_over << "}}";
  }
  if (own) {
    char shares[160];
    std::snprintf(shares, sizeof shares,
                  ",\"wrongly_admitted_share\":%.9f,\"wrongly_denied_share\":%.9f",
                  own->share(own->wrongly_admitted), own->share(own->wrongly_denied));
    o << ",\"own_definition\":{\"algorithm\":" << quoted(to_string(rule.algo()))
      << ",\"judged\":" << own->judged << ",\"wrongly_admitted\":" << own->wrongly_admitted
      << ",\"wrongly_denied\":" << own->wrongly_denied << shares
      << ",\"bound_extra_burst\":" << own->bound_extra_burst
      << ",\"beyond_bound\":" << own->beyond_bound << "}";
  }
  if (!result.first_error.empty()) o << ",\"first_error\":" << quoted(result.first_error);
  o << "}";
  return o.str();
}

std::string report::text() const {
  const auto& h = result.latency_us;
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line, "floodgate-bench  %s on %s\n", target_name(opts.target),
                opts.url.c_str());
  out += line;
  if (opts.concurrency)
    std::snprintf(line, sizeof line,
                  "policy      concurrency, %lld holders at once per key, lease %lld ms, each "
                  "held %lld ms\n",
                  static_cast<long long>(opts.limit), static_cast<long long>(opts.lease.count()),
                  static_cast<long long>(opts.hold.count()));
  else
    std::snprintf(line, sizeof line,
                  "policy      %s, limit %lld per %lld ms, burst %lld, cost %lld\n",
                  std::string(to_string(rule.algo())).c_str(), static_cast<long long>(rule.limit()),
                  static_cast<long long>(rule.window().count()),
                  static_cast<long long>(rule.burst()), static_cast<long long>(opts.cost));
  out += line;
  std::snprintf(line, sizeof line,
                "load        %zu processes x %zu threads x %zu in flight, %zu keys%s, %s\n",
                opts.processes, opts.threads, opts.inflight, opts.keys,
                opts.zipf > 0 ? (" (zipf " + number(opts.zipf) + ")").c_str() : " (uniform)",
                opts.is_burst()
                    ? ("burst of " + std::to_string(*opts.burst) + " per thread").c_str()
                    : (number(elapsed_s()) + " s").c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "decisions   %llu in %.3f s = %.0f/s   allowed %llu   denied %llu   errors %llu\n",
                static_cast<unsigned long long>(result.decisions()), elapsed_s(),
                decisions_per_sec(), static_cast<unsigned long long>(result.allowed),
                static_cast<unsigned long long>(result.denied),
                static_cast<unsigned long long>(result.errors));
  out += line;
  if (rule.reserve() > 0) {
    std::snprintf(
        line, sizeof line,
        "reserved    up to %lld units a grant, spent within %lld ms: %llu of the %llu "
        "admitted (%.1f%%) answered from reserved units, with no backend call\n",
        static_cast<long long>(rule.reserve()), static_cast<long long>(rule.reserve_for().count()),
        static_cast<unsigned long long>(result.reserved),
        static_cast<unsigned long long>(result.allowed),
        result.allowed
            ? 100.0 * static_cast<double>(result.reserved) / static_cast<double>(result.allowed)
            : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "latency us  p50 %llu   p90 %llu   p99 %llu   p99.9 %llu   max %llu\n",
                static_cast<unsigned long long>(h.percentile(0.5)),
                static_cast<unsigned long long>(h.percentile(0.9)),
                static_cast<unsigned long long>(h.percentile(0.99)),
                static_cast<unsigned long long>(h.percentile(0.999)),
                static_cast<unsigned long long>(h.max()));
  out += line;
  if (opts.is_open_loop()) {
    const auto& c = result.corrected_latency_us;
    std::snprintf(line, sizeof line,
                  "corrected   p50 %llu   p90 %llu   p99 %llu   p99.9 %llu   max %llu   (from the "
                  "intended send time; %.0f/s %s, %llu dropped)\n",
                  static_cast<unsigned long long>(c.percentile(0.5)),
                  static_cast<unsigned long long>(c.percentile(0.9)),
                  static_cast<unsigned long long>(c.percentile(0.99)),
                  static_cast<unsigned long long>(c.percentile(0.999)),
                  static_cast<unsigned long long>(c.max()), *opts.rate,
                  opts.arrivals == arrivals::poisson ? "poisson" : "constant",
                  static_cast<unsigned long long>(result.dropped));
    out += line;
    const auto shape = report_shape(opts, rule);
    std::snprintf(line, sizeof line,
                  "traffic     %.2f%% of requests from %zu keys over the limit, %.2f%% from keys "
                  "at 50-100%% of it\n",
                  100 * shape.over_limit_share, shape.keys_over, 100 * shape.near_limit_share);
    out += line;
  }
  if (opts.concurrency) {
    std::snprintf(line, sizeof line,
                  "leases      granted %llu   refused %llu   released %llu   lost (expired) %llu\n"
                  "held        at most %lld at once of limit %lld (%zu of %zu keys reached it, "
                  "%zu over)\n",
                  static_cast<unsigned long long>(result.allowed),
                  static_cast<unsigned long long>(result.denied),
                  static_cast<unsigned long long>(result.released),
                  static_cast<unsigned long long>(result.lost), static_cast<long long>(max_held()),
                  static_cast<long long>(opts.limit), held ? held->keys_reaching(opts.limit) : 0,
                  opts.keys, held ? held->keys_reaching(opts.limit + 1) : 0);
    out += line;
    if (!result.first_error.empty()) out += "first error " + result.first_error + "\n";
    return out;
  }
  std::snprintf(line, sizeof line,
                "accuracy    over-admitted %lld of %lld admitted (%s; clock tolerance %lld ms",
                static_cast<long long>(accuracy.over_admitted),
                static_cast<long long>(accuracy.admitted), accuracy.bound.c_str(),
                static_cast<long long>(opts.clock_tolerance.count()));
  out += line;
  if (accuracy.undetermined) out += "; " + std::to_string(accuracy.undetermined) + " not placeable";
  out += ")\n";
  if (accuracy.aligned_over_admitted)
    out += "            per aligned window: over-admitted " +
           std::to_string(*accuracy.aligned_over_admitted) + "\n";
  if (replayed) {
    const auto& w = *replayed;
    std::snprintf(line, sizeof line,
                  "replay      vs sliding_log: wrongly admitted %llu (%.4f%%)   wrongly denied %llu "
                  "(%.4f%%) of %llu judged (%llu unjudged)\n",
                  static_cast<unsigned long long>(w.wrongly_admitted),
                  100 * w.share(w.wrongly_admitted),
                  static_cast<unsigned long long>(w.wrongly_denied), 100 * w.share(w.wrongly_denied),
                  static_cast<unsigned long long>(w.judged),
                  static_cast<unsigned long long>(w.unjudged));
    out += line;
    std::snprintf(line, sizeof line,
                  "            over-admission per key-window: max %lld   mean %.4f   (%llu of %llu "
                  "key-windows over)\n",
                  static_cast<long long>(w.max_over_admission), w.mean_over_admission,
                  static_cast<unsigned long long>(w.key_windows_over),
                  static_cast<unsigned long long>(w.key_windows));
    out += line;
  }
  if (own) {
    std::snprintf(line, sizeof line,
                  "            vs %s's own definition: wrongly admitted %llu (%.4f%%)   wrongly "
                  "denied %llu (%.4f%%)\n",
                  std::string(to_string(rule.algo())).c_str(),
                  static_cast<unsigned long long>(own->wrongly_admitted),
                  100 * own->share(own->wrongly_admitted),
                  static_cast<unsigned long long>(own->wrongly_denied),
                  100 * own->share(own->wrongly_denied));
    out += line;
    if (rule.reserve() > 0) {
      std::snprintf(line, sizeof line,
                    "            reservations' bound (%lld more burst): %llu admitted beyond it\n",
                    static_cast<long long>(own->bound_extra_burst),
                    static_cast<unsigned long long>(own->beyond_bound));
      out += line;
    }
  }
  if (!result.first_error.empty()) out += "first error " + result.first_error + "\n";
  return out;
}

}  // namespace floodgate::bench
