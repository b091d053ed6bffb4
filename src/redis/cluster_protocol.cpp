#include "redis/cluster_protocol.hpp"

#include <array>

#include "redis/url.hpp"

namespace floodgate::redis {
namespace {

constexpr std::array<std::uint16_t, 256> crc16_table = [] {
  std::array<std::uint16_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i << 8;
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
    t[i] = static_cast<std::uint16_t>(crc);
  }
  return t;
}();

}  // namespace

std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char c : data)
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

int key_slot(std::string_view key) noexcept {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) % cluster_slots;
}

std::optional<redirect> parse_redirect(std::string_view error) {
  redirect r;
  if (error.starts_with("MOVED "))
    r.what = redirect::kind::moved, error.remove_prefix(6);
  else if (error.starts_with("ASK "))
    r.what = redirect::kind::ask, error.remove_prefix(4);
  else
    return std::nullopt;
  const auto space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot = parse_number<int>(error.substr(0, space));
  const auto address = error.substr(space + 1);
  const auto colon = address.rfind(':');  // IPv6 hosts contain ':' too: the port is last
  if (!slot || *slot < 0 || *slot >= cluster_slots || colon == std::string_view::npos)
    return std::nullopt;
  const auto port = parse_number<std::uint16_t>(address.substr(colon + 1));
  if (!port || *port == 0) return std::nullopt;
  r.slot = *slot;
  r.host = std::string(address.substr(0, colon));
  r.port = *port;
  return r;
}

// Each element: [first, last, [host, port, id, ...], replicas...].
std::optional<std::vector<slot_range>> parse_cluster_slots(const reply& r) {
  if (r.kind != reply::type::array) return std::nullopt;
  std::vector<slot_range> out;
  for (const auto& e : r.elements) {
    if (e.kind != reply::type::array || e.elements.size() < 3) return std::nullopt;
    const auto& first = e.elements[0];
    const auto& last = e.elements[1];
    const auto& master = e.elements[2];
    if (first.kind != reply::type::integer || last.kind != reply::type::integer ||
        master.kind != reply::type::array || master.elements.size() < 2 ||
        master.elements[0].kind != reply::type::string ||
        master.elements[1].kind != reply::type::integer)
      return std::nullopt;
    if (first.integer < 0 || last.integer < first.integer || last.integer >= cluster_slots ||
        master.elements[1].integer < 1 || master.elements[1].integer > 65535)
      return std::nullopt;
    std::string host = master.elements[0].str;
    if (host == "?") host.clear();
    out.push_back({static_cast<int>(first.integer), static_cast<int>(last.integer), std::move(host),
                   static_cast<std::uint16_t>(master.elements[1].integer)});
  }
  return out;
}

}  // namespace floodgate::redis
