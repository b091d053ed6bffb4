#include "rules/rules_ref.hpp"

#include <algorithm>
#include <cctype>

#include "floodgate/errors.hpp"

namespace floodgate::service {

std::string rules_ref::describe() const {
  std::string u = url;
  // user:password@ -> user:***@ (as the backend's own messages mask it)
  const auto scheme = u.find("://");
  const auto at = u.find('@', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme != std::string::npos && at != std::string::npos) {
    const auto colon = u.find(':', scheme + 3);
    const auto from = colon != std::string::npos && colon < at ? colon + 1 : scheme + 3;
    u.replace(from, at - from, "***");
  }
  return u + "#" + name;
}

rules_ref parse_rules_ref(std::string_view text) {
  const auto hash = text.rfind('#');
  if (hash == std::string_view::npos)
    throw config_error("'" + std::string(text) + "' names no document: give REDIS-URL#NAME");
  rules_ref r{std::string(text.substr(0, hash)), std::string(text.substr(hash + 1))};
  const bool ok =
      !r.name.empty() && r.name.size() <= 64 &&
      std::all_of(r.name.begin(), r.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      });
  if (!ok)
    throw config_error("'" + r.name +
                       "' is not a rules name (1 to 64 letters, digits, '_', '-', '.')");
  if (r.url.empty()) throw config_error("'" + std::string(text) + "' names no Redis URL");
  return r;
}

rules_keys::rules_keys(const rules_ref& r, std::string_view key_prefix) {
  const std::string base = std::string(key_prefix) + "rules:{" + r.name + "}:";
  head = base + "head";
  versions = base + "versions";
  history = base + "history";
  channel = base + "changed";
}

}  // namespace floodgate::service
