#include "redis/sentinel_answer.hpp"

#include <charconv>

namespace floodgate::redis {

std::optional<redis_endpoint> primary_at(const redis_endpoint& primary, std::string_view host,
                                         std::string_view port_text) {
  std::uint16_t port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (host.empty() || ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0)
    return std::nullopt;
  auto out = primary;
  out.host = std::string(host);
  out.port = port;
  return out;
}

std::optional<sentinel_answer> read_master_answer(const reply& r, const redis_endpoint& primary) {
  if (r.kind != reply::type::array || r.elements.size() % 2 != 0) return std::nullopt;
  std::string_view ip, port, flags, epoch_text;
  bool has_epoch = false;
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    const auto& field = r.elements[i];
    const auto& value = r.elements[i + 1];
    if (field.kind != reply::type::string || value.kind != reply::type::string) continue;
    if (field.str == "ip") ip = value.str;
    if (field.str == "port") port = value.str;
    if (field.str == "flags") flags = value.str;
    if (field.str == "config-epoch") {
      epoch_text = value.str;
      has_epoch = true;
    }
  }
  auto at = primary_at(primary, ip, port);
  if (!at || !has_epoch) return std::nullopt;
  std::uint64_t epoch = 0;
  const auto [end, ec] =
      std::from_chars(epoch_text.data(), epoch_text.data() + epoch_text.size(), epoch);
  if (ec != std::errc{} || end != epoch_text.data() + epoch_text.size()) return std::nullopt;
  sentinel_answer out{std::move(*at), epoch, false};
  // flags is a comma-separated list: "master,failover_in_progress,..."
  for (std::string_view rest = flags; !rest.empty();) {
    const auto comma = rest.find(',');
    if (rest.substr(0, comma) == "failover_in_progress") out.in_failover = true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

std::optional<sentinel_answer> read_address_answer(const reply& r,
                                                   const redis_endpoint& primary) {
  if (r.kind != reply::type::array || r.elements.size() != 2 ||
      r.elements[0].kind != reply::type::string || r.elements[1].kind != reply::type::string)
    return std::nullopt;
  auto at = primary_at(primary, r.elements[0].str, r.elements[1].str);
  if (!at) return std::nullopt;
  return sentinel_answer{std::move(*at), std::nullopt, false};
}

bool primary_choice::take(const sentinel_answer& a, bool have_primary, bool primary_refused) {
  if (!a.epoch) {
    // No epoch to compare: never leave a primary that still takes writes on its word (it may
    // be the stale one); a sentinel's push or a READONLY moves the client instead.
    return !have_primary || primary_refused;
  }
  if (a.in_failover && have_primary) return false;
  if (*a.epoch < epoch_seen_) return false;  // has not heard of a failover another reported
  // The push named the configuration after epoch_seen_; an answer at epoch_seen_ predates it,
  // unless the pushed primary refuses writes (a late push for a superseded failover).
  if (push_ahead_ && *a.epoch == epoch_seen_ && !primary_refused) return false;
  epoch_seen_ = *a.epoch;
  push_ahead_ = false;
  return true;
}

}  // namespace floodgate::redis
