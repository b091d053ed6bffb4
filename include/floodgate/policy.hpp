// A rate-limit policy: which algorithm, how many, per how long, how bursty.
//
// A policy is validated when it is built and immutable afterwards, so the request path never
// sees an impossible value. docs/algorithms.md defines what each algorithm admits.
//
//   using namespace std::chrono_literals;
//   floodgate::policy api{"api", floodgate::algorithm::sliding_log, 100, 60s};
//   floodgate::policy upload{"upload", floodgate::algorithm::token_bucket, 10, 1s,
//                            /*burst=*/50, floodgate::failure_mode::open};
//   floodgate::policy quota{"quota", floodgate::algorithm::fixed_window, 1000, 24h, std::nullopt,
//                           floodgate::failure_mode::closed, floodgate::local_denials::off};
//   auto login = floodgate::policy{"login", floodgate::algorithm::sliding_log, 5, 1min}
//                    .with_block_for(15min);  // refused once: refused for 15 minutes
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate {

enum class algorithm { sliding_log, sliding_window, fixed_window, token_bucket, gcra };

// What a backend failure (timeout, Redis down, error reply) means for this policy.
enum class failure_mode {
  open,    // admit the request, marked degraded
  closed,  // deny the request
  // Decide in this process at limit ÷ N (N: the instances sharing the backend, from their
  // heartbeats or limiter_options::instances), marked degraded; docs/algorithms.md.
  local,
};

// Whether a limiter may deny this policy's requests locally, without a backend call, while an
// earlier denial's retry_after runs (docs/algorithms.md, "Local denials").
enum class local_denials {
  on,   // when the limiter has them on (limiter_options::local_denials)
  off,  // every check asks the backend
};

std::string_view to_string(algorithm a) noexcept;
std::string_view to_string(failure_mode m) noexcept;
std::optional<algorithm> parse_algorithm(std::string_view s) noexcept;
std::optional<failure_mode> parse_failure_mode(std::string_view s) noexcept;

// True for the algorithms whose admissions never exceed their definition's bound
// (all but sliding_window, which approximates).
bool is_exact(algorithm a) noexcept;
// True for the algorithms that take a burst (token_bucket, gcra).
bool takes_burst(algorithm a) noexcept;

class policy {
 public:
  // Largest limit × window (ms), and burst × window, a policy may have: every algorithm's
  // arithmetic stays in exact integers below 2^53, in C++ and in Redis's Lua alike.
  static constexpr std::int64_t max_capacity_window_product = 1'000'000'000'000'000;
  static constexpr std::size_t max_name_length = 64;

  // Throws config_error naming the problem: empty or over-long name, name with characters
  // other than [A-Za-z0-9_.-], limit < 1, window < 1 ms, burst given for an algorithm that has
  // none, burst < 1, or limit/burst × window too large.
  // `burst` defaults to `limit` for token_bucket and gcra.
  policy(std::string name, algorithm algo, std::int64_t limit, std::chrono::milliseconds window,
         std::optional<std::int64_t> burst = std::nullopt,
         failure_mode on_failure = failure_mode::closed,
         floodgate::local_denials local = floodgate::local_denials::on);

  const std::string& name() const noexcept { return name_; }
  algorithm algo() const noexcept { return algorithm_; }
  // Requests (cost units) per window: the sustained rate.
  std::int64_t limit() const noexcept { return limit_; }
  std::chrono::milliseconds window() const noexcept { return window_; }
  // token_bucket and gcra: the most cost admitted at once from rest. Others: equals limit.
  std::int64_t burst() const noexcept { return burst_; }
  failure_mode on_failure() const noexcept { return failure_mode_; }
  floodgate::local_denials local_denials() const noexcept { return local_denials_; }
  // The most cost a single request can ever be admitted with; decision::limit reports this.
  std::int64_t capacity() const noexcept { return burst_; }
  // The penalty: once a check is refused by the window, the key is refused for this long
  // whatever its window says (docs/algorithms.md, "Penalties"); 0: none.
  std::chrono::milliseconds block_for() const noexcept { return block_for_; }

  // This policy with a penalty of `d` (0 removes it). Throws config_error unless
  // 0 <= d <= max_block_for.
  policy with_block_for(std::chrono::milliseconds d) const;

  // Reservations (docs/algorithms.md, "Reservations"): a limiter takes up to reserve() units of
  // a key's quota in one backend call, recorded there as admitted, and admits from them in its
  // own process for at most reserve_for() and never past the window they were taken in
  // (token_bucket, gcra: a tenth of the bucket's refill time B x W / L; sliding_log: a tenth of
  // the window). 0: off.
  std::int64_t reserve() const noexcept { return reserve_; }
  std::chrono::milliseconds reserve_for() const noexcept { return reserve_for_; }
  // This policy with reservations of at most `n` units spent for at most `d` (n = 0 turns them
  // off). Throws config_error unless 0 <= n <= limit, 1 ms <= d <= window, the failure mode is
  // not local, there is no block_for, and for token_bucket, gcra and sliding_log a grant's spend
  // span is at least min_reserve_span (refill time or window at least 100 ms).
  policy with_reserve(std::int64_t n, std::chrono::milliseconds d) const;
  static constexpr std::chrono::milliseconds min_reserve_span{10};
  // 10^15 ms: a block's end (now + block_for) stays an exact integer in Lua's doubles.
  static constexpr std::chrono::milliseconds max_block_for{1'000'000'000'000'000};

  friend bool operator==(const policy&, const policy&) = default;

 private:
  std::string name_;
  algorithm algorithm_;
  std::int64_t limit_;
  std::chrono::milliseconds window_;
  std::int64_t burst_;
  failure_mode failure_mode_;
  floodgate::local_denials local_denials_;
  std::chrono::milliseconds block_for_{0};
  std::int64_t reserve_ = 0;
  std::chrono::milliseconds reserve_for_{0};
};

}  // namespace floodgate
