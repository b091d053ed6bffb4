#include "admin/admin.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>

#include "admin/status.hpp"
#include "admin/ui_page.hpp"
#include "api/render.hpp"
#include "config/ip_address.hpp"
#include "telemetry/hot_keys.hpp"

namespace floodgate::service {
namespace {

namespace json = boost::json;

json::array entries(const std::vector<space_saving::entry>& list) {
  json::array out;
  for (const auto& e : list) {
    json::object o;
    o["key"] = valid_utf8(e.key);  // a key from a header may hold any byte
    o["count"] = e.count;
    o["error"] = e.error;
    out.push_back(std::move(o));
  }
  return out;
}

http_response top(const http_request& req, const admin_sources& sources) {
  if (!sources.top)
    return error_response(404, "hot keys are off (start floodgated with --top-keys N)");
  const auto& opts = sources.top->options();
  const auto raw_rule = query_param(req.target, "rule");
  if (!raw_rule || raw_rule->empty())
    return error_response(400, "give the rule: /v1/top?rule=NAME");
  const auto rule = percent_decode(*raw_rule);
  const auto raw_n = query_param(req.target, "n");
  const auto text = raw_n ? percent_decode(*raw_n) : std::nullopt;
  if (!rule || (raw_n && !text)) return error_response(400, "bad percent-encoding in the query");
  const auto rules = sources.store->get();
  const auto* named = rules->find(*rule);
  if (!named) return error_response(404, "unknown rule '" + std::string(rule->substr(0, 64)) + "'");
  // Leases are not checks: an empty list would read as "no hot keys".
  if (named->concurrency)
    return error_response(400, "rule '" + *rule +
                                   "' is a concurrency rule: its acquires are not counted in hot "
                                   "keys");
  std::size_t n = 10;
  if (text) {
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
    if (ec != std::errc{} || end != text->data() + text->size() || n < 1 || n > opts.capacity)
      return error_response(400, "n must be a number from 1 to " + std::to_string(opts.capacity));
  }
  const auto r = sources.top->report(*rule, n, hot_keys::clock::now());
  json::object o;
  o["rule"] = *rule;
  o["interval_ms"] = opts.interval.count();
  o["span_ms"] = r.span.count();
  o["capacity"] = opts.capacity;
  o["checks"] = r.checks;
  o["denials"] = r.denials;
  o["checked"] = entries(r.checked);
  o["denied"] = entries(r.denied);
  return admin_json(json::serialize(o));
}

// GET /v1/inspect, POST /v1/reset: ?rule=NAME&key=KEY, validated.
admin_result key_call(const http_request& req, const admin_sources& sources,
                      key_request::action what) {
  const std::string_view usage = what == key_request::action::inspect
                                     ? "give the rule and the key: /v1/inspect?rule=NAME&key=KEY"
                                     : "give the rule and the key: /v1/reset?rule=NAME&key=KEY";
  if (!sources.keys || !sources.store) return error_response(404, "key inspection is off");
  if (what == key_request::action::reset && req.header("Origin"))
    return error_response(403, "reset is not for browsers (the request has an Origin header)");
  const auto raw_rule = query_param(req.target, "rule");
  const auto raw_key = query_param(req.target, "key");
  if (!raw_rule || !raw_key || raw_rule->empty() || raw_key->empty())
    return error_response(400, usage);
  auto rule = percent_decode(*raw_rule);
  auto key = percent_decode(*raw_key);
  if (!rule || !key) return error_response(400, "bad percent-encoding in the query");
  if (key->size() > sources.max_key_size)
    return error_response(400,
                          "key longer than " + std::to_string(sources.max_key_size) + " bytes");
  key_request k;
  k.what = what;
  k.rules = sources.store->get();
  k.rule = k.rules->find(*rule);
  if (!k.rule) return error_response(404, "unknown rule '" + rule->substr(0, 64) + "'");
  if (k.rule->concurrency)
    return error_response(400, "rule '" + *rule +
                                   "' is a concurrency rule: its leases are not "
                                   "inspected here");
  k.key = std::move(*key);
  return k;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s) {
  return percent_decode(s, plus_sign::space);
}

std::optional<std::string_view> query_param(std::string_view target, std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  auto query = target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name)
      return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
  }
  return std::nullopt;
}

bool admin_host_allowed(std::optional<std::string_view> host,
                        const std::vector<std::string>& names) {
  if (!host) return true;
  std::string_view name = *host;
  const auto digits = [](std::string_view port) {
    return !port.empty() && port.size() <= 5 &&
           std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (name.starts_with('[')) {
    const auto close = name.find(']');
    if (close == std::string_view::npos) return false;
    const auto rest = name.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && digits(rest.substr(1)))) return false;
    const auto literal = parse_ip(name.substr(1, close - 1));
    return literal && literal->kind() == ip_address::family::v6;
  }
  if (const auto colon = name.find(':'); colon != std::string_view::npos) {
    if (!digits(name.substr(colon + 1))) return false;
    name = name.substr(0, colon);
  }
  if (const auto literal = parse_ip(name); literal && literal->kind() == ip_address::family::v4)
    return true;
  // Host names compare as header names do: ASCII case-insensitive.
  const auto same = [name](std::string_view n) { return same_header_name(n, name); };
  return same("localhost") || std::any_of(names.begin(), names.end(), same);
}

namespace {

// route_admin, before the answer is locked down.
admin_result route(const http_request& req, const admin_sources& sources) {
  if (!admin_host_allowed(req.header("Host"), sources.host_names))
    return error_response(403, "Host '" + std::string(req.header("Host")->substr(0, 64)) +
                                   "' is not a name of this admin listener: use its IP address "
                                   "or localhost, or start floodgated with --admin-host NAME");
  const std::string_view target = req.target;
  if (target == "*")
    return req.method == "OPTIONS" ? render_server_options() : render_star_misused();
  const auto path = target.substr(0, target.find('?'));
  if (path == "/v1/reset") {
    if (req.method != "POST") {
      auto res = error_response(405, "method not allowed; use POST");
      res.headers.emplace_back("Allow", "POST");
      return res;
    }
    return key_call(req, sources, key_request::action::reset);
  }
  const bool known = path == "/metrics" || path == "/healthz" || path == "/readyz" ||
                     path == "/healthcheck" || path == "/v1/top" || path == "/v1/status" ||
                     path == "/v1/inspect" || path == "/ui";
  if (!known) return error_response(404, "not found");
  if (req.method != "GET" && req.method != "HEAD") {
    auto res = error_response(405, "method not allowed; use GET, HEAD");
    res.headers.emplace_back("Allow", "GET, HEAD");
    return res;
  }
  if (path == "/metrics") return render_metrics(sources.stats->render());
  if (path == "/healthz") return render_health();
  if (path == "/v1/top") return top(req, sources);
  if (path == "/v1/status") return render_status(sources);
  if (path == "/v1/inspect") return key_call(req, sources, key_request::action::inspect);
  if (path == "/ui") return render_ui();
  const auto b = sources.backend ? sources.backend() : backend_state{};
  if (path == "/healthcheck") return render_healthcheck(b.healthy);
  return render_ready(b.healthy, b.kind);
}

}  // namespace

admin_result route_admin(const http_request& req, const admin_sources& sources) {
  auto routed = route(req, sources);
  if (auto* res = std::get_if<http_response>(&routed)) lock_down(*res);
  return routed;
}

}  // namespace floodgate::service
