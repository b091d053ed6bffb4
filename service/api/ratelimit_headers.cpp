#include "api/ratelimit_headers.hpp"

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

// One member of a RateLimit or RateLimit-Policy list: "name";k1=v1;k2=v2. Policy names are
// [A-Za-z0-9_.-] (policy's constructor checks), so they need no escaping inside an sf-string.
void append_member(std::string& out, std::string_view name, std::string_view k1, std::int64_t v1,
                   std::string_view k2, std::int64_t v2) {
  out.reserve(out.size() + name.size() + 48);  // one allocation, not one per append
  out += '"';
  out += name;
  out += "\";";
  out += k1;
  append_int(out, v1);
  out += k2;
  append_int(out, v2);
}

}  // namespace

void append_policy_member(std::string& out, const policy& p) {
  append_member(out, p.name(), "q=", p.limit(),
                ";w=", std::max<std::int64_t>(1, ceil_seconds(p.window())));
}

void append_ratelimit_member(std::string& out, const policy& p, const decision& d) {
  append_member(out, p.name(), "r=", d.remaining, ";t=", ceil_seconds(d.reset_after));
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
