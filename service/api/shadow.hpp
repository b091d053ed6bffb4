// Shadow rules (`shadow: true`): a new limit watched on real traffic before it is enforced.
// The check is decided and counted as usual (the backend charges admitted cost, denials are
// counted), and always answered as allowed; a denial is reported as "shadow_denied": true and
// in floodgate_shadow_denied_total. A shadow rule is checked alone (config.cpp and route.cpp
// refuse it in groups and "rules" lists): in an all-or-nothing check its denial would refuse
// the enforced rules beside it.
#pragma once

#include "api/route.hpp"
#include "floodgate/decision.hpp"

namespace floodgate::service {

// Whether `plan` checks a shadow rule (then it is its only item).
bool is_shadow(const check_plan& plan) noexcept;

// The answer to a shadow check: 200 (JSON) or 204 (auth), whatever the decision. The JSON body
// has the rule's live counters, retry_after_ms 0, "shadow_denied": true when the rule was over
// the limit, "degraded": true when the backend failed or local mode decided. No RateLimit
// headers: the rule does not limit anyone yet.
http_response render_shadow(const check_plan& plan, const multi_check_result& result);

}  // namespace floodgate::service
