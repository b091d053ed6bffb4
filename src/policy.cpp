#include "floodgate/policy.hpp"

#include <array>
#include <string>

#include "core/reserve.hpp"
#include "floodgate/errors.hpp"

namespace floodgate {
namespace {

constexpr std::array<std::string_view, 5> algorithm_names = {
    "sliding_log", "sliding_window", "fixed_window", "token_bucket", "gcra"};

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw config_error("policy '" + name + "': " + what);
}

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

}  // namespace

std::string_view to_string(algorithm a) noexcept {
  return algorithm_names[static_cast<std::size_t>(a)];
}

std::string_view to_string(failure_mode m) noexcept {
  switch (m) {
    case failure_mode::open: return "open";
    case failure_mode::closed: return "closed";
    case failure_mode::local: return "local";
  }
  return "closed";
}

std::optional<algorithm> parse_algorithm(std::string_view s) noexcept {
  for (std::size_t i = 0; i < algorithm_names.size(); ++i)
    if (algorithm_names[i] == s) return static_cast<algorithm>(i);
  return std::nullopt;
}

std::optional<failure_mode> parse_failure_mode(std::string_view s) noexcept {
  if (s == "open") return failure_mode::open;
  if (s == "closed") return failure_mode::closed;
  if (s == "local") return failure_mode::local;
  return std::nullopt;
}

bool is_exact(algorithm a) noexcept { return a != algorithm::sliding_window; }

bool takes_burst(algorithm a) noexcept {
  return a == algorithm::token_bucket || a == algorithm::gcra;
}

policy::policy(std::string name, algorithm algo, std::int64_t limit,
               std::chrono::milliseconds window, std::optional<std::int64_t> burst,
               failure_mode on_failure, floodgate::local_denials local)
    : name_(std::move(name)),
      algorithm_(algo),
      limit_(limit),
      window_(window),
      burst_(burst.value_or(limit)),
      failure_mode_(on_failure),
      local_denials_(local) {
  if (name_.empty()) fail(name_, "name must not be empty");
  if (name_.size() > max_name_length)
    fail(name_, "name longer than " + std::to_string(max_name_length) + " characters");
  for (char c : name_)
    if (!valid_name_char(c)) fail(name_, "name may hold only letters, digits, '_', '-' and '.'");
  if (static_cast<std::size_t>(algo) >= algorithm_names.size()) fail(name_, "unknown algorithm");
  if (limit_ < 1) fail(name_, "limit must be at least 1 (got " + std::to_string(limit_) + ")");
  if (window_.count() < 1)
    fail(name_, "window must be at least 1ms (got " + std::to_string(window_.count()) + "ms)");
  if (burst && !takes_burst(algo))
    fail(name_, "burst applies only to token_bucket and gcra, not " +
                    std::string(to_string(algo)));
  if (burst_ < 1) fail(name_, "burst must be at least 1 (got " + std::to_string(burst_) + ")");
  const std::int64_t bound = max_capacity_window_product;
  if (limit_ > bound / window_.count() || burst_ > bound / window_.count())
    fail(name_, "limit (and burst) x window in ms must be at most 10^15; use a shorter window "
                "or a smaller limit");
}

policy policy::with_block_for(std::chrono::milliseconds d) const {
  if (d.count() < 0 || d > max_block_for)
    fail(name_, "block_for must be in 0..10^15 ms (got " + std::to_string(d.count()) + "ms)");
  if (d.count() > 0 && reserve_ > 0) fail(name_, "block_for does not combine with reserve yet");
  policy out = *this;
  out.block_for_ = d;
  return out;
}

policy policy::with_reserve(std::int64_t n, std::chrono::milliseconds d) const {
  if (n < 0 || n > limit_)
    fail(name_, "reserve must be in 0..limit (" + std::to_string(limit_) + "), got " +
                    std::to_string(n));
  policy out = *this;
  out.reserve_ = n;
  out.reserve_for_ = n == 0 ? std::chrono::milliseconds{0} : d;
  if (n == 0) return out;
  if (d.count() < 1 || d > window_)
    fail(name_, "reserve_for must be in 1ms..window (" + std::to_string(window_.count()) +
                    "ms), got " + std::to_string(d.count()) + "ms");
  if (!core::windowed(algorithm_) && core::spend_span(algorithm_, core::params::of(out)) < min_reserve_span.count())
    fail(name_, std::string("reserve needs ") +
                    (algorithm_ == algorithm::sliding_log
                         ? "a window of at least " +
                               std::to_string(min_reserve_span.count() * core::span_share)
                         : "a refill time burst x window / limit of at least " +
                               std::to_string(min_reserve_span.count() * core::span_share)) +
                    " ms: a grant is spent within a tenth of it, and must outlive its round "
                    "trip (docs/algorithms.md, \"Reservations\")");
  if (failure_mode_ == failure_mode::local)
    fail(name_, "reserve does not combine with failure_mode local yet");
  if (block_for_.count() > 0) fail(name_, "reserve does not combine with block_for yet");
  return out;
}

}  // namespace floodgate
