#include "ratelimit_headers.hpp"

#include <algorithm>
#include <charconv>

namespace floodgate::service {

std::int64_t ceil_seconds(std::chrono::milliseconds ms) noexcept {
  const auto v = std::max<std::int64_t>(ms.count(), 0);
  return v / 1000 + (v % 1000 != 0 ? 1 : 0);
}

namespace {

// Why not operator+ and std::to_string: these run for every check; one buffer, no temporaries.
void append_int(std::string& out, std::int64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

}  // namespace

// Policy names are [A-Za-z0-9_.-] (policy's constructor checks), so they need no escaping
// inside an sf-string.
void append_policy_member(std::string& out, const policy& p) {
  out.reserve(out.size() + p.name().size() + 48);  // one allocation, not one per append
  out += '"';
  out += p.name();
  out += "\";q=";
  append_int(out, p.limit());
  out += ";w=";
  append_int(out, std::max<std::int64_t>(1, ceil_seconds(p.window())));
}

void append_ratelimit_member(std::string& out, const policy& p, const decision& d) {
  out.reserve(out.size() + p.name().size() + 48);
  out += '"';
  out += p.name();
  out += "\";r=";
  append_int(out, d.remaining);
  out += ";t=";
  append_int(out, ceil_seconds(d.reset_after));
}

std::string policy_member(const policy& p) {
  std::string out;
  append_policy_member(out, p);
  return out;
}

std::string ratelimit_member(const policy& p, const decision& d) {
  std::string out;
  append_ratelimit_member(out, p, d);
  return out;
}

}  // namespace floodgate::service
