#include "admin.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>

#include "handler.hpp"
#include "hot_keys.hpp"

namespace floodgate::service {
namespace {

namespace json = boost::json;

json::array entries(const std::vector<space_saving::entry>& list) {
  json::array out;
  for (const auto& e : list) {
    json::object o;
    o["key"] = e.key;
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
  const auto rule = query_param(req.target, "rule");
  if (!rule || rule->empty()) return error_response(400, "give the rule: /v1/top?rule=NAME");
  const auto rules = sources.store->get();
  if (!rules->find(*rule))
    return error_response(404, "unknown rule '" + std::string(rule->substr(0, 64)) + "'");
  std::size_t n = 10;
  if (const auto text = query_param(req.target, "n")) {
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
  http_response res;
  res.headers.emplace_back("Content-Type", "application/json");
  res.headers.emplace_back("Cache-Control", "no-store");  // callers' keys
  res.body = json::serialize(o);
  res.body += '\n';
  return res;
}

}  // namespace

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

http_response handle_admin(const http_request& req, const admin_sources& sources) {
  const std::string_view target = req.target;
  const auto path = target.substr(0, target.find('?'));
  const bool known =
      path == "/metrics" || path == "/healthz" || path == "/readyz" || path == "/v1/top";
  if (!known) return error_response(404, "not found");
  if (req.method != "GET" && req.method != "HEAD") {
    auto res = error_response(405, "method not allowed; use GET, HEAD");
    res.headers.emplace_back("Allow", "GET, HEAD");
    return res;
  }
  if (path == "/metrics") return render_metrics(sources.stats->render());
  if (path == "/healthz") return render_health();
  if (path == "/v1/top") return top(req, sources);
  const auto b = sources.backend ? sources.backend() : backend_state{};
  return render_ready(b.healthy, b.kind);
}

}  // namespace floodgate::service
