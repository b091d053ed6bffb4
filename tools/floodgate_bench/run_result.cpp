#include "run_result.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace floodgate::bench {
namespace {

template <class T>
void put(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
void put_array(std::string& out, const T* data, std::size_t n) {
  put(out, static_cast<std::uint64_t>(n));
  out.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

class cursor {
 public:
  explicit cursor(std::string_view bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, bytes_.data(), sizeof v);
    bytes_.remove_prefix(sizeof v);
    return v;
  }
  template <class T>
  std::vector<T> get_array() {
    const auto n = get<std::uint64_t>();
    if (n > bytes_.size() / sizeof(T)) throw std::runtime_error("run result: truncated");
    std::vector<T> v(n);
    std::memcpy(v.data(), bytes_.data(), n * sizeof(T));
    bytes_.remove_prefix(n * sizeof(T));
    return v;
  }
  bool done() const noexcept { return bytes_.empty(); }

 private:
  void need(std::size_t n) const {
    if (bytes_.size() < n) throw std::runtime_error("run result: truncated");
  }
  std::string_view bytes_;
};

}  // namespace

void run_result::merge(const run_result& other) {
  allowed += other.allowed;
  denied += other.denied;
  errors += other.errors;
  reserved += other.reserved;
  latency_us.merge(other.latency_us);
  corrected_latency_us.merge(other.corrected_latency_us);
  dropped += other.dropped;
  released += other.released;
  lost += other.lost;
  admissions.insert(admissions.end(), other.admissions.begin(), other.admissions.end());
  decision_log.insert(decision_log.end(), other.decision_log.begin(), other.decision_log.end());
  decision_log_cutoff_ms = std::min(decision_log_cutoff_ms, other.decision_log_cutoff_ms);
  started_us = started_us == 0
                   ? other.started_us
                   : (other.started_us == 0 ? started_us : std::min(started_us, other.started_us));
  finished_us = std::max(finished_us, other.finished_us);
  if (first_error.empty()) first_error = other.first_error;
}

std::string run_result::serialize() const {
  static_assert(std::is_trivially_copyable_v<admission> && sizeof(admission) == 32);
  std::string out;
  put(out, allowed);
  put(out, denied);
  put(out, errors);
  put(out, reserved);
  put(out, started_us);
  put(out, finished_us);
  put(out, latency_us.max());
  put(out, latency_us.sum());
  const auto buckets = latency_us.buckets();
  put_array(out, buckets.data(), buckets.size());
  put(out, dropped);
  put(out, released);
  put(out, lost);
  put(out, corrected_latency_us.max());
  put(out, corrected_latency_us.sum());
  const auto corrected = corrected_latency_us.buckets();
  put_array(out, corrected.data(), corrected.size());
  put_array(out, admissions.data(), admissions.size());
  static_assert(std::is_trivially_copyable_v<decision_record> && sizeof(decision_record) == 24);
  put_array(out, decision_log.data(), decision_log.size());
  put(out, decision_log_cutoff_ms);
  put_array(out, first_error.data(), first_error.size());
  return out;
}

run_result run_result::deserialize(std::string_view bytes) {
  cursor c(bytes);
  run_result r;
  r.allowed = c.get<std::uint64_t>();
  r.denied = c.get<std::uint64_t>();
  r.errors = c.get<std::uint64_t>();
  r.reserved = c.get<std::uint64_t>();
  r.started_us = c.get<std::int64_t>();
  r.finished_us = c.get<std::int64_t>();
  const auto max = c.get<std::uint64_t>();
  const auto sum = c.get<std::uint64_t>();
  const auto buckets = c.get_array<std::uint64_t>();
  r.latency_us = histogram::from_buckets(buckets, max, sum);
  r.dropped = c.get<std::uint64_t>();
  r.released = c.get<std::uint64_t>();
  r.lost = c.get<std::uint64_t>();
  const auto corrected_max = c.get<std::uint64_t>();
  const auto corrected_sum = c.get<std::uint64_t>();
  const auto corrected = c.get_array<std::uint64_t>();
  r.corrected_latency_us = histogram::from_buckets(corrected, corrected_max, corrected_sum);
  r.admissions = c.get_array<admission>();
  r.decision_log = c.get_array<decision_record>();
  r.decision_log_cutoff_ms = c.get<std::int64_t>();
  const auto error = c.get_array<char>();
  r.first_error.assign(error.begin(), error.end());
  if (!c.done()) throw std::runtime_error("run result: trailing bytes");
  return r;
}

}  // namespace floodgate::bench
