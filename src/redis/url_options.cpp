// apply_url_options (topology.hpp): the options in a Redis URL's query string.
#include <optional>
#include <string>

#include "floodgate/duration.hpp"
#include "floodgate/errors.hpp"
#include "redis/topology.hpp"

namespace floodgate::redis {
namespace {

constexpr std::string_view known =
    "timeout, connect_timeout, connections, key_prefix, batch, writes_in_flight, functions, "
    "breaker_failures, breaker_open_for, "
    "tls_ca_file, tls_cert_file, tls_key_file, tls_server_name, tls_verify, sentinel_user, "
    "sentinel_password";

bool prefix_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':';
}

}  // namespace

std::string_view apply_url_options(std::string_view url, redis_options& options) {
  const auto question = url.find('?');
  if (question == std::string_view::npos) return url;
  const std::string_view base = url.substr(0, question);
  std::string_view query = url.substr(question + 1);
  auto fail = [&](const std::string& why) {
    throw config_error("redis URL '" + redact_url(url) + "': " + why);
  };
  if (query.empty()) fail("empty query string after '?'");
  if (query.find('#') != std::string_view::npos) fail("fragments are not supported");

  // Options of one kind of URL only: elsewhere they would be silently ignored.
  const bool tls_url = iequals_prefix(base, "rediss://") ||
                       iequals_prefix(base, "rediss+cluster://") ||
                       iequals_prefix(base, "rediss+sentinel://");
  const bool sentinel_url = is_sentinel_url(base);

  std::string seen = ",";
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const auto eq = pair.find('=');
    const std::string name(pair.substr(0, eq));
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    if (name.empty()) fail("an option without a name (expected " + std::string(known) + ")");
    if (seen.find("," + name + ",") != std::string::npos) fail("option '" + name + "' given twice");
    seen += name + ",";
    if (value.empty()) fail("option '" + name + "' has no value");
    if (name.starts_with("tls_") && !tls_url)
      fail("option '" + name +
           "' applies to rediss://, rediss+cluster:// and rediss+sentinel:// URLs only");
    if (name.starts_with("sentinel_") && !sentinel_url)
      fail("option '" + name + "' applies to redis+sentinel:// URLs only");

    // A whole number from 1 to `hi`; yes or no.
    const auto count = [&](long long hi) {
      const auto n = parse_number<long long>(value);
      if (!n || *n < 1 || *n > hi)
        fail(name + " must be a number from 1 to " + std::to_string(hi) + " (got '" +
             std::string(value) + "')");
      return *n;
    };
    const auto yes_no = [&] {
      if (value != "yes" && value != "no")
        fail(name + " must be yes or no (got '" + std::string(value) + "')");
      return value == "yes";
    };

    if (name == "timeout" || name == "connect_timeout" || name == "breaker_open_for") {
      const auto d = parse_duration(value);
      if (!d || d->count() < 1)
        fail(name + " must be a duration of at least 1ms such as 50ms or 2s (got '" +
             std::string(value) + "')");
      (name == "timeout"           ? options.timeout
       : name == "connect_timeout" ? options.connect_timeout
                                   : options.breaker_open_for) = *d;
    } else if (name == "connections") {
      options.connections = static_cast<std::size_t>(count(1024));
    } else if (name == "batch") {
      options.max_batch_items = static_cast<std::size_t>(count(1024));
    } else if (name == "writes_in_flight") {
      options.max_writes_in_flight = static_cast<std::size_t>(count(65536));
    } else if (name == "breaker_failures") {
      options.breaker_failures = static_cast<int>(count(1'000'000));
    } else if (name == "key_prefix") {
      for (char c : value)
        if (!prefix_char(c))
          fail("key_prefix may hold only letters, digits and _ - . : (got '" + std::string(value) +
               "')");
      options.key_prefix = std::string(value);
    } else if (name == "sentinel_user") {
      options.sentinel_user = value;
    } else if (name == "sentinel_password") {
      options.sentinel_password = std::string(value);
    } else if (name == "tls_ca_file") {
      options.tls.ca_file = value;
    } else if (name == "tls_cert_file") {
      options.tls.cert_file = value;
    } else if (name == "tls_key_file") {
      options.tls.key_file = value;
    } else if (name == "tls_server_name") {
      options.tls.server_name = value;
    } else if (name == "functions") {
      options.use_functions = yes_no();
    } else if (name == "tls_verify") {
      options.tls.verify_peer = yes_no();
    } else {
      fail("unknown option '" + name + "' (expected " + std::string(known) + ")");
    }
  }
  return base;
}

}  // namespace floodgate::redis
