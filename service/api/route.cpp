// Request → what to check (or an error response). No I/O, no backend, no Beast.
#include "api/route.hpp"

#include <boost/json/value.hpp>
#include <chrono>

#include "api/json_parse.hpp"
#include "api/render.hpp"

namespace floodgate::service {
namespace {

namespace json = boost::json;

constexpr std::string_view auth_prefix = "/v1/auth/";

// The rule that decides a key: a live run-time override, else a static one, else the rule.
struct resolver {
  const runtime_snapshot* live = nullptr;
  std::int64_t now = 0;  // ms since the Unix epoch, for the run-time entries' expiry

  const rule& operator()(const rule& r, std::string_view key) const {
    if (live)
      if (const rule* o = live->resolve(r, key, now)) return *o;
    return config::resolve(r, key);
  }
};

// Caller-controlled text in messages, cut to something readable.
std::string quoted(std::string_view s) {
  constexpr std::size_t max = 64;
  return "'" + std::string(s.substr(0, max)) + (s.size() > max ? "...'" : "'");
}

http_response bad_request(std::string_view message) {
  return error_response(400, message);
}

http_response method_not_allowed(std::string_view allow) {
  auto res = error_response(405, "method not allowed; use " + std::string(allow));
  res.headers.emplace_back("Allow", allow);
  return res;
}

bool get_or_head(const http_request& req) {
  return req.method == "GET" || req.method == "HEAD";
}

// The "key" field (null if absent) into `out`; an error message otherwise.
std::optional<std::string> parse_key(const json::value* key_v, const request_limits& limits,
                                     std::string& out) {
  if (!key_v) return std::string("missing field 'key'");
  if (!key_v->is_string()) return std::string("'key' must be a string");
  const auto key = std::string_view(key_v->get_string());
  if (key.empty()) return std::string("'key' must not be empty");
  if (key.size() > limits.max_key_size)
    return "'key' is longer than " + std::to_string(limits.max_key_size) + " bytes";
  out = key;
  return std::nullopt;
}

// The "cost" field (null if absent: 1) for rule `r` into `out`; an error message otherwise.
// `hint` follows the type and sign errors: what the smallest cost means where it is asked.
std::optional<std::string> parse_cost(const json::value* cost_v, const rule& r, std::int64_t& out,
                                      std::string_view hint = " (0 peeks without consuming)") {
  out = 1;
  if (!cost_v) return std::nullopt;
  if (!cost_v->is_int64() && !cost_v->is_uint64())
    return "'cost' must be an integer" + std::string(hint);
  const auto capacity = r.policy.capacity();
  if (cost_v->is_int64() && cost_v->get_int64() < 0)
    return "'cost' must not be negative" + std::string(hint);
  if (cost_v->is_uint64() || cost_v->get_int64() > capacity)
    return "'cost' exceeds the capacity of rule " + quoted(r.name()) + " (" +
           std::to_string(capacity) + "): it could never be admitted";
  out = cost_v->get_int64();
  return std::nullopt;
}

// The fields of a {"<what>", "key", "cost"} object (null when absent), or the first unknown
// field's name.
struct item_fields {
  const json::value* what = nullptr;  // "rule" or "group"
  const json::value* key = nullptr;
  const json::value* cost = nullptr;
};
std::optional<std::string_view> fields_of(const json::object& o, std::string_view what,
                                          item_fields& out) {
  for (const auto& kv : o) {
    if (kv.key() == what)
      out.what = &kv.value();
    else if (kv.key() == "key")
      out.key = &kv.value();
    else if (kv.key() == "cost")
      out.cost = &kv.value();
    else
      return kv.key();
  }
  return std::nullopt;
}

// One {"rule", "key", "cost"} object into `out`; an error message otherwise. `refund`: the
// cost's messages say a refund's range, not /v1/check's (where 0 peeks).
std::optional<std::string> parse_item(const json::object& o, const config& rules,
                                      const request_limits& limits, const resolver& resolve,
                                      check_plan::item& out, bool refund = false) {
  item_fields f;
  if (auto unknown = fields_of(o, "rule", f)) return "unknown field " + quoted(*unknown);
  if (!f.what) return std::string("missing field 'rule'");
  if (!f.what->is_string()) return std::string("'rule' must be a string");
  const auto name = std::string_view(f.what->get_string());
  out.rule = rules.find(name);
  if (!out.rule) return "unknown rule " + quoted(name);
  if (out.rule->concurrency)
    return "rule " + quoted(name) + " is a concurrency limit: use /v1/acquire and /v1/release";

  if (auto err = parse_key(f.key, limits, out.key)) return err;
  out.rule = &resolve(*out.rule, out.key);

  if (refund) return parse_cost(f.cost, *out.rule, out.cost, " (a refund is at least 1)");
  return parse_cost(f.cost, *out.rule, out.cost);
}

// A {"group", "key", "cost"} object: every rule of the group with the one key and cost.
std::optional<std::string> parse_group_check(const json::object& o, const config& rules,
                                             const request_limits& limits, const resolver& resolve,
                                             check_plan& plan) {
  item_fields f;
  if (auto unknown = fields_of(o, "group", f))
    return "unknown field " + quoted(*unknown) + " (a group check takes group, key, cost)";
  if (!f.what) return std::string("missing field 'group'");
  if (!f.what->is_string()) return std::string("'group' must be a string");
  const auto name = std::string_view(f.what->get_string());
  plan.group = rules.find_group(name);
  if (!plan.group) return "unknown group " + quoted(name);
  std::string key;
  if (auto err = parse_key(f.key, limits, key)) return err;
  for (auto i : plan.group->rules) {
    const rule& r = resolve(rules.rules()[i], key);
    check_plan::item item{&r, key, 1};
    if (auto err = parse_cost(f.cost, r, item.cost)) return err;
    plan.items.push_back(std::move(item));
  }
  return std::nullopt;
}

route_result parse_check(const http_request& req, std::shared_ptr<const config> rules,
                         const request_limits& limits, const resolver& resolve) {
  json::value body;
  // Depth 4: {"rules": [{...}]} needs 3.
  if (auto err = parse_json_strict(req.body, 4, body)) return bad_request(*err);
  const auto* obj = body.if_object();
  if (!obj) return bad_request("the body must be a JSON object");

  check_plan plan;
  plan.rules = std::move(rules);
  if (obj->contains("group")) {
    if (obj->contains("rules") || obj->contains("rule"))
      return bad_request("give one of 'group', 'rules' or 'rule'");
    plan.kind = check_plan::style::json_multi;
    if (auto err = parse_group_check(*obj, *plan.rules, limits, resolve, plan))
      return bad_request(*err);
    return plan;
  }
  if (const auto* list = obj->if_contains("rules")) {
    if (obj->size() != 1)
      return bad_request("give either 'rules' or 'rule', 'key' and 'cost', not both");
    const auto* arr = list->if_array();
    if (!arr) return bad_request("'rules' must be a list of {\"rule\", \"key\", \"cost\"} objects");
    if (arr->empty()) return bad_request("'rules' must not be empty");
    if (arr->size() > limits.max_items)
      return bad_request("'rules' may hold at most " + std::to_string(limits.max_items) +
                         " entries");
    plan.kind = check_plan::style::json_multi;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const std::string where = "rules[" + std::to_string(i) + "]: ";
      const auto* item_obj = (*arr)[i].if_object();
      if (!item_obj) return bad_request(where + "must be a {\"rule\", \"key\", \"cost\"} object");
      check_plan::item item;
      if (auto err = parse_item(*item_obj, *plan.rules, limits, resolve, item))
        return bad_request(where + *err);
      if (item.rule->shadow)
        return bad_request(where + "rule " + quoted(item.rule->name()) +
                           " is a shadow rule, which is checked alone (POST /v1/check "
                           "{\"rule\", \"key\"} or GET /v1/auth/{rule})");
      for (const auto& seen : plan.items)
        if (seen.rule == item.rule && seen.key == item.key)
          return bad_request(where + "rule " + quoted(item.rule->name()) +
                             " with this key appears twice");
      plan.items.push_back(std::move(item));
    }
    return plan;
  }

  check_plan::item item;
  if (auto err = parse_item(*obj, *plan.rules, limits, resolve, item)) return bad_request(*err);
  plan.kind = check_plan::style::json;
  plan.items.push_back(std::move(item));
  return plan;
}

// POST /v1/refund {"rule", "key", "cost"}: cost 1 by default, at least 1.
route_result parse_refund(const http_request& req, std::shared_ptr<const config> rules,
                          const request_limits& limits, const resolver& resolve) {
  json::value body;
  if (auto err = parse_json_strict(req.body, 2, body)) return bad_request(*err);
  const auto* obj = body.if_object();
  if (!obj) return bad_request("the body must be a JSON object");
  check_plan plan;
  plan.rules = std::move(rules);
  plan.kind = check_plan::style::refund;
  check_plan::item item;
  if (auto err = parse_item(*obj, *plan.rules, limits, resolve, item, true))
    return bad_request(*err);
  if (item.cost < 1) return bad_request("'cost' must be at least 1 for a refund");
  // The IETF draft's header (draft-ietf-httpapi-idempotency-key-header): a retry of a refund
  // whose outcome was unknown gives back once.
  if (req.repeats("Idempotency-Key")) return bad_request("header Idempotency-Key given twice");
  if (const auto k = req.header("Idempotency-Key")) {
    if (!valid_idempotency_key(*k))
      return bad_request("'Idempotency-Key' must be 1..64 of A-Z a-z 0-9 _ . : -");
    plan.idempotency_key = *k;
  }
  plan.items.push_back(std::move(item));
  return plan;
}

// POST /v1/acquire {"rule", "key"}; /v1/release and /v1/renew {"rule", "key", "lease"}.
route_result parse_lease_call(const http_request& req, check_plan::style kind,
                              std::shared_ptr<const config> rules, const request_limits& limits) {
  json::value body;
  if (auto err = parse_json_strict(req.body, 2, body)) return bad_request(*err);
  const auto* obj = body.if_object();
  if (!obj) return bad_request("the body must be a JSON object");
  const bool wants_lease = kind != check_plan::style::acquire;
  const json::value *rule_v = nullptr, *key_v = nullptr, *lease_v = nullptr;
  for (const auto& kv : *obj) {
    if (kv.key() == "rule")
      rule_v = &kv.value();
    else if (kv.key() == "key")
      key_v = &kv.value();
    else if (kv.key() == "lease" && wants_lease)
      lease_v = &kv.value();
    else
      return bad_request("unknown field " + quoted(kv.key()) +
                         (wants_lease ? " (takes rule, key, lease)" : " (takes rule, key)"));
  }
  if (!rule_v) return bad_request("missing field 'rule'");
  if (!rule_v->is_string()) return bad_request("'rule' must be a string");
  const auto name = std::string_view(rule_v->get_string());
  check_plan plan;
  plan.rules = std::move(rules);
  plan.kind = kind;
  check_plan::item item;
  item.rule = plan.rules->find(name);
  if (!item.rule) return bad_request("unknown rule " + quoted(name));
  if (!item.rule->concurrency)
    return bad_request("rule " + quoted(name) + " is not a concurrency limit: use /v1/check");
  if (auto err = parse_key(key_v, limits, item.key)) return bad_request(*err);
  if (wants_lease) {
    if (!lease_v) return bad_request("missing field 'lease'");
    if (!lease_v->is_string()) return bad_request("'lease' must be a string");
    const auto lease = std::string_view(lease_v->get_string());
    if (lease.empty() || lease.size() > 64)
      return bad_request("'lease' must be the id /v1/acquire answered");
    plan.lease = lease;
  }
  plan.items.push_back(std::move(item));
  return plan;
}

// Splits a list header's value at commas (RFC 9110 5.6.1), trimming spaces and tabs; empty
// elements are skipped. fn(element) returns false to stop.
template <class Fn>
void for_each_element(std::string_view value, Fn fn) {
  while (!value.empty()) {
    const auto comma = value.find(',');
    auto element = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    while (!element.empty() && (element.front() == ' ' || element.front() == '\t'))
      element.remove_prefix(1);
    while (!element.empty() && (element.back() == ' ' || element.back() == '\t'))
      element.remove_suffix(1);
    if (!element.empty() && !fn(element)) return;
  }
}

// The client address for a remote_addr rule, or the 400 to answer. The TCP peer, unless the
// peer is a trusted proxy: then X-Real-IP, else X-Forwarded-For's rightmost address that is
// not itself a trusted proxy (the entries to its left were written by whoever sent them). A
// value that is not an IP address is refused, never used as a key: a key is a client's
// quota, and free text would let a client pick whose.
std::variant<std::string, http_response> client_address(const http_request& req,
                                                        const config& rules) {
  const auto peer = parse_ip(req.peer_address);
  if (!peer) {
    // Not from a socket we know (an empty address): nothing to key on.
    if (req.peer_address.empty()) return bad_request("no client address to use as the key");
    return req.peer_address;  // the kernel's text, e.g. with an IPv6 zone: not client input
  }
  if (!rules.is_trusted_proxy(*peer)) return peer->to_string();

  if (req.repeats("X-Real-IP")) return bad_request("header X-Real-IP given twice");
  if (const auto real_ip = req.header("X-Real-IP")) {
    const auto a = parse_ip(*real_ip);
    if (!a) return bad_request("X-Real-IP " + quoted(*real_ip) + " is not an IP address");
    return a->to_string();
  }
  // Every X-Forwarded-For line, in order, is one list; walk it from the right.
  std::vector<std::string_view> hops;
  for (const auto& [name, value] : req.headers)
    if (same_header_name(name, "X-Forwarded-For"))
      for_each_element(value, [&](std::string_view e) {
        hops.push_back(e);
        return hops.size() <= 64;  // a longer chain is not a real one
      });
  if (hops.size() > 64) return bad_request("X-Forwarded-For has more than 64 addresses");
  std::optional<ip_address> client;
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    client = parse_ip(*it);
    if (!client)
      return bad_request("X-Forwarded-For entry " + quoted(*it) + " is not an IP address");
    if (!rules.is_trusted_proxy(*client)) break;  // the first hop we did not write ourselves
  }
  // No header, or every hop a trusted proxy: the leftmost is as far back as anyone can see.
  return client ? client->to_string() : peer->to_string();
}

// The key /v1/auth takes for rule `r` from the request, or the 400 to answer.
std::variant<std::string, http_response> key_from_source(const http_request& req, const rule& r,
                                                         const config& rules,
                                                         const request_limits& limits) {
  std::string key;
  if (r.key.from == key_source::kind::header) {
    if (req.repeats(r.key.header))
      return bad_request("header " + r.key.header + " given twice (rule '" + r.name() +
                         "' takes its key from it)");
    const auto value = req.header(r.key.header);
    if (!value)
      return bad_request("missing header " + r.key.header + " (rule '" + r.name() +
                         "' takes its key from it)");
    if (value->empty()) return bad_request("header " + r.key.header + " is empty");
    key = *value;
  } else {
    auto address = client_address(req, rules);
    if (auto* res = std::get_if<http_response>(&address)) return std::move(*res);
    key = std::move(std::get<std::string>(address));
  }
  if (key.size() > limits.max_key_size)
    return bad_request("the key is longer than " + std::to_string(limits.max_key_size) + " bytes");
  return key;
}

// /v1/auth/{name}: a rule, or a group whose rules each take their key from their own source.
route_result parse_auth(const http_request& req, std::string_view name,
                        std::shared_ptr<const config> rules, const request_limits& limits,
                        const resolver& resolve) {
  check_plan plan;
  plan.kind = check_plan::style::auth;
  plan.peek = req.method == "HEAD";
  const std::int64_t cost = plan.peek ? 0 : 1;
  // The nginx path: a rule costs no container beyond the plan's own.
  auto add = [&](const rule& r) -> std::optional<http_response> {
    if (r.concurrency)
      return bad_request("rule " + quoted(r.name()) +
                         " is a concurrency limit: use /v1/acquire and /v1/release");
    auto key = key_from_source(req, r, *rules, limits);
    if (auto* res = std::get_if<http_response>(&key)) return std::move(*res);
    auto& k = std::get<std::string>(key);
    plan.items.push_back({&resolve(r, k), std::move(k), cost});
    return std::nullopt;
  };
  if (const rule* r = rules->find(name)) {
    if (auto res = add(*r)) return std::move(*res);
  } else if (const group* g = rules->find_group(name)) {
    plan.group = g;
    for (auto i : g->rules)
      if (auto res = add(rules->rules()[i])) return std::move(*res);
  } else {
    return error_response(404, "unknown rule or group " + quoted(name));
  }
  plan.rules = std::move(rules);
  return plan;
}

}  // namespace

std::vector<check_item> check_plan::check_items() const {
  std::vector<check_item> out;
  out.reserve(items.size());
  for (const auto& i : items) out.push_back({i.key, &i.rule->policy, i.cost});
  return out;
}

route_result route(const http_request& req, std::shared_ptr<const config> rules,
                   const request_limits& limits, std::shared_ptr<const runtime_snapshot> live) {
  resolver resolve{live.get(), 0};
  if (live)
    resolve.now = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  // Keeps the run-time overrides' rules alive with the plan.
  auto keep = [&](route_result r) {
    if (auto* plan = std::get_if<check_plan>(&r)) plan->live = std::move(live);
    return r;
  };
  const std::string_view target = req.target;
  if (target == "*")
    return req.method == "OPTIONS" ? render_server_options() : render_star_misused();
  const auto path = target.substr(0, target.find('?'));

  if (path == "/v1/check") {
    if (req.method != "POST") return method_not_allowed("POST");
    return keep(parse_check(req, std::move(rules), limits, resolve));
  }
  for (const auto& [name, kind] : {std::pair{"/v1/acquire", check_plan::style::acquire},
                                   std::pair{"/v1/release", check_plan::style::release},
                                   std::pair{"/v1/renew", check_plan::style::renew}}) {
    if (path != name) continue;
    if (req.method != "POST") return method_not_allowed("POST");
    return parse_lease_call(req, kind, std::move(rules), limits);
  }
  if (path == "/v1/refund") {
    if (req.method != "POST") return method_not_allowed("POST");
    return keep(parse_refund(req, std::move(rules), limits, resolve));
  }
  if (path.starts_with(auth_prefix)) {
    if (!get_or_head(req)) return method_not_allowed("GET, HEAD");
    return keep(
        parse_auth(req, path.substr(auth_prefix.size()), std::move(rules), limits, resolve));
  }
  for (const auto& [name, p] :
       {std::pair{"/healthz", probe::healthz}, std::pair{"/readyz", probe::readyz},
        std::pair{"/healthcheck", probe::healthcheck}, std::pair{"/metrics", probe::metrics}}) {
    if (path != name) continue;
    if (!get_or_head(req)) return method_not_allowed("GET, HEAD");
    return p;
  }
  return error_response(404, "not found");
}

}  // namespace floodgate::service
