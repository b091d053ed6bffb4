// Raw bytes from an HTTP client, read as floodgated's server reads them (Beast's parser with the
// server's default limits, pipelined requests one after another), converted to the handler's
// http_request, routed, and every outcome a backend could give rendered. Properties: no crash;
// a plan keeps the request caps (key size, items, cost within capacity); every response has a
// valid status, header names and values that cannot split the response (no CR, LF, NUL), and a
// JSON body that parses (valid UTF-8 included) whenever it says it is JSON.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/parse.hpp>
#include <memory>
#include <string>

#include "api/render.hpp"
#include "config/config.hpp"
#include "fuzz_entries.hpp"

namespace floodgate::fuzz {
namespace {

namespace http = boost::beast::http;
using namespace service;

constexpr std::string_view rules_text = R"(
rules:
  - {name: api, algorithm: sliding_log, limit: 100, window: 60s, failure_mode: open, key: "header:X-Api-Key"}
  - {name: per-ip, algorithm: gcra, limit: 10, window: 1s, burst: 20}
  - {name: uploads, algorithm: token_bucket, limit: 10, window: 1m, burst: 50, key: "header:X-User-Id"}
  - {name: global, algorithm: fixed_window, limit: 1000, window: 1h, failure_mode: open}
  - {name: login-minute, algorithm: sliding_window, limit: 5, window: 1m, key: "header:X-User-Id"}
groups:
  - {name: login, rules: [login-minute, uploads]}
  - {name: mixed, rules: [api, per-ip]}
)";

const std::shared_ptr<const config>& rules() {
  static const auto loaded =
      std::make_shared<const config>(parse_config(rules_text, "fuzz-rules.yaml"));
  return loaded;
}

bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void check_response(const http_response& res) {
  require(res.status >= 100 && res.status <= 599, "a response status outside 100..599");
  for (const auto& [name, value] : res.headers) {
    require(!name.empty(), "an empty header name");
    for (char c : name) require(is_tchar(c), "a header name with a non-token character");
    require(value.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos,
            "a header value with CR, LF or NUL (response splitting)");
  }
  if (res.header("Content-Type").value_or("") == "application/json") {
    boost::system::error_code ec;
    (void)boost::json::parse(res.body, ec);
    require(!ec, "a JSON response body that does not parse: " + res.body);
  }
}

void check_plan_caps(const check_plan& plan, const request_limits& limits) {
  require(!plan.items.empty(), "a plan without items");
  require(plan.items.size() <= limits.max_items, "a plan with more items than max_items");
  require(plan.rules != nullptr, "a plan that does not hold its rules");
  for (const auto& item : plan.items) {
    require(item.rule != nullptr, "an item without a rule");
    require(plan.rules->find(item.rule->name()) == item.rule, "an item's rule is not the plan's");
    require(!item.key.empty() && item.key.size() <= limits.max_key_size,
            "an item key empty or over max_key_size");
    require(item.cost >= 0 && item.cost <= item.rule->policy.capacity(),
            "an item cost outside 0..capacity");
  }
  require(plan.check_items().size() == plan.items.size(), "check_items() lost items");
}

// Every way a backend can answer the plan; `seed` varies the numbers.
void render_all(const check_plan& plan, std::uint8_t seed) {
  using std::chrono::milliseconds;
  const auto n = plan.items.size();
  auto decisions = [&](bool allowed_all) {
    std::vector<decision> out;
    for (std::size_t i = 0; i < n; ++i) {
      const auto cap = plan.items[i].rule->policy.capacity();
      const bool allowed = allowed_all || ((seed >> (i % 8)) & 1) != 0;
      out.push_back(
          {allowed, cap, allowed ? cap - plan.items[i].cost : 0, milliseconds(seed * 997),
           allowed ? milliseconds(0) : (seed & 0x80 ? decision::never : milliseconds(seed))});
    }
    return out;
  };
  check_response(render(plan, {outcome::allowed, decisions(true), {}, false}));
  check_response(render(plan, {outcome::over_limit, decisions(false), {}, (seed & 1) != 0}));
  check_response(render(plan, {outcome::backend_error, decisions(seed & 2),
                               make_error_code(std::errc::timed_out), false}));
  check_response(render(
      plan, {outcome::invalid_request, {}, make_error_code(std::errc::invalid_argument), false}));
  auto fewer = decisions(true);
  fewer.pop_back();  // a backend answering the wrong number of items: a 500, still well formed
  check_response(render(plan, {outcome::allowed, std::move(fewer), {}, false}));
  if (plan.kind == service::check_plan::style::refund) {
    check_result r;
    r.outcome = outcome::allowed;
    r.decision = decisions(true).front();
    r.refunded = seed & 3;
    r.replayed = (seed & 4) != 0;
    check_response(render_refund(r));
  }
}

service::http_request convert(http::request<http::string_body>& msg) {
  service::http_request req;
  req.method.assign(msg.method_string());
  req.target.assign(msg.target());
  for (const auto& field : msg) req.headers.emplace_back(field.name_string(), field.value());
  req.body = std::move(msg.body());
  req.peer_address = "192.0.2.7";
  return req;
}

}  // namespace

void http_request(bytes data) {
  if (data.empty()) return;
  const std::uint8_t seed = data[0];
  std::string_view stream(reinterpret_cast<const char*>(data.data()) + 1, data.size() - 1);
  const request_limits limits;
  // Pipelined requests, as one connection's buffer holds them (a few are enough).
  for (int requests = 0; requests < 8 && !stream.empty(); ++requests) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 * 1024);  // server_options' defaults
    parser.body_limit(64 * 1024);
    parser.eager(true);
    boost::beast::error_code ec;
    while (!parser.is_done() && !ec) {
      if (stream.empty()) return;  // the rest has not arrived: the server waits for it
      const auto used = parser.put(boost::asio::buffer(stream.data(), stream.size()), ec);
      if (used == 0 && !ec) return;
      stream.remove_prefix(used);
    }
    if (ec) return;  // incomplete (the server waits) or malformed (it answers 4xx and closes)
    const bool keep_alive = parser.get().keep_alive();
    const auto req = convert(parser.get());
    auto routed = route(req, rules(), limits);
    if (auto* res = std::get_if<http_response>(&routed)) {
      require(res->status >= 400, "route answered a request by itself with a success");
      check_response(*res);
    } else if (auto* plan = std::get_if<check_plan>(&routed)) {
      check_plan_caps(*plan, limits);
      render_all(*plan, seed);
    } else {
      check_response(render_health());
      check_response(render_ready(seed & 1, "memory"));
    }
    if (!keep_alive) return;
  }
}

}  // namespace floodgate::fuzz
