// A backend URL as floodgated --redis and make_backend take it: query options applied, then
// parsed as redis_backend's constructor does (cluster, sentinel or plain), without connecting.
// Properties: bad input is a config_error and nothing else; a password that was parsed never
// shows in redact_url's output or in an error message.
#include <string>

#include "floodgate/errors.hpp"
#include "floodgate/options.hpp"
#include "fuzz_entries.hpp"
#include "redis/sentinel_client.hpp"
#include "redis/topology.hpp"
#include "redis/url.hpp"

namespace floodgate::fuzz {
namespace {

std::size_t occurrences(std::string_view text, std::string_view part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A secret written once in the URL, as is (not %-encoded), must not survive redaction. Short
// or starred secrets could match other parts of the URL or the mask by chance: skip those.
// With a '%' in the userinfo the password may be written encoded, and its decoded text found
// once elsewhere (in the user name, which is shown): then that one occurrence is not the
// password, so only URLs without '%' before their last '@' are judged.
void require_masked(std::string_view url, const std::optional<std::string>& secret) {
  if (!secret || secret->size() < 4 || secret->find('*') != std::string::npos) return;
  if (occurrences(url, *secret) != 1) return;
  if (url.substr(0, std::min(url.rfind('@'), url.find('?'))).find('%') != std::string_view::npos)
    return;
  require(redis::redact_url(url).find(*secret) == std::string::npos,
          "redact_url shows a password the parser accepted");
}

}  // namespace

void redis_url(bytes data) {
  const std::string url(reinterpret_cast<const char*>(data.data()), data.size());
  redis_options options;
  try {
    const std::string_view base = redis::apply_url_options(url, options);
    require(url.starts_with(base), "apply_url_options returned something other than a prefix");
    require_masked(url, options.sentinel_password);
    if (redis::is_cluster_url(base)) {
      const auto seeds = redis::parse_cluster_url(base);
      require(!seeds.empty(), "a cluster URL parsed to no seeds");
      for (const auto& s : seeds) require(s.port != 0 && !s.host.empty(), "a seed without address");
      require_masked(url, seeds.front().password);
    } else if (redis::is_sentinel_url(base)) {
      const auto config = redis::parse_sentinel_url(base);
      require(!config.sentinels.empty() && !config.master_name.empty(), "sentinel URL half parsed");
      require_masked(url, config.primary.password);
    } else {
      const auto ep = redis::parse_redis_url(base);
      require(ep.port != 0 && !ep.host.empty(), "an endpoint without address");
      require(ep.db >= 0, "a negative database");
      require_masked(url, ep.password);
    }
  } catch (const config_error& e) {
    require(*e.what() != '\0', "a config_error without a message");
  }
  // Redaction is total: any text, including what no parser accepts.
  (void)redis::redact_url(url);
}

}  // namespace floodgate::fuzz
