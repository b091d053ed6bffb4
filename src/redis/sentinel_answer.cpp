#include "redis/sentinel_answer.hpp"

#include <tuple>

namespace floodgate::redis {

std::optional<redis_endpoint> primary_at(const redis_endpoint& primary, std::string_view host,
                                         std::string_view port_text) {
  const auto port = parse_number<std::uint16_t>(port_text);
  if (host.empty() || !port || *port == 0) return std::nullopt;
  auto out = primary;
  out.host = std::string(host);
  out.port = *port;
  return out;
}

std::optional<std::uint64_t> read_config_epoch(const reply& master) {
  if (master.kind != reply::type::array) return std::nullopt;
  for (std::size_t i = 0; i + 1 < master.elements.size(); i += 2) {
    const auto& field = master.elements[i];
    const auto& value = master.elements[i + 1];
    if (field.kind != reply::type::string || field.str != "config-epoch" ||
        value.kind != reply::type::string)
      continue;
    return parse_number<std::uint64_t>(value.str);
  }
  return std::nullopt;
}

std::optional<sentinel_answer> read_answer(const reply& address,
                                           std::optional<std::uint64_t> epoch,
                                           const redis_endpoint& primary) {
  if (address.kind != reply::type::array || address.elements.size() != 2 ||
      address.elements[0].kind != reply::type::string ||
      address.elements[1].kind != reply::type::string)
    return std::nullopt;
  auto at = primary_at(primary, address.elements[0].str, address.elements[1].str);
  if (!at) return std::nullopt;
  return sentinel_answer{std::move(*at), epoch};
}

bool refuses_sentinel_master(const reply& master) {
  return master.is_error() &&
         (master.error_code() == "NOPERM" || master.str.find("nknown") != std::string::npos);
}

std::optional<sentinel_answer> best_answer(const std::vector<sentinel_answer>& answers) {
  const sentinel_answer* best = nullptr;
  const auto rank = [](const sentinel_answer& a) {
    return std::tuple(a.epoch.has_value(), a.epoch.value_or(0));
  };
  for (const auto& a : answers)
    if (!best || rank(a) > rank(*best)) best = &a;
  if (!best) return std::nullopt;
  return *best;
}

bool primary_choice::take(const sentinel_answer& a, bool have_primary, bool primary_refused) {
  if (!a.epoch) {
    // No epoch to compare: never leave a primary that still takes writes on its word (it may
    // be the stale one); a sentinel's push or a READONLY moves the client instead.
    return !have_primary || primary_refused;
  }
  if (*a.epoch < epoch_seen_) return false;  // has not heard of a failover another reported
  // The push named the configuration after epoch_seen_; an answer at epoch_seen_ predates it,
  // unless the pushed primary refuses writes (a late push for a superseded failover).
  if (push_ahead_ && *a.epoch == epoch_seen_ && !primary_refused) return false;
  epoch_seen_ = *a.epoch;
  push_ahead_ = false;
  return true;
}

}  // namespace floodgate::redis
