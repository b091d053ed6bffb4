#include "api/shadow.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace floodgate::service {

bool is_shadow(const check_plan& plan) noexcept {
  return plan.items.size() == 1 && plan.items.front().rule->shadow;
}

http_response render_shadow(const check_plan& plan, const multi_check_result& result) {
  http_response res;
  if (plan.kind == check_plan::style::auth) {
    res.status = 204;
    return res;
  }
  const bool failed = result.outcome == outcome::backend_error;
  const decision d = result.decisions.empty() ? decision{} : result.decisions.front();
  boost::json::object body;
  body["allowed"] = true;
  body["limit"] = d.limit;
  body["remaining"] = d.remaining;
  body["reset_after_ms"] = d.reset_after.count();
  body["retry_after_ms"] = 0;
  if (failed || result.local_mode) body["degraded"] = true;
  if (!failed && !result.allowed()) body["shadow_denied"] = true;
  res.headers.emplace_back("Content-Type", "application/json");
  res.body = boost::json::serialize(body);
  res.body += '\n';
  return res;
}

}  // namespace floodgate::service
