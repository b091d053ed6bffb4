// GET /ui on the admin listener: the live status page. One self-contained HTML document
// (inline CSS and script, no external assets, no build step) that polls /v1/status and
// /v1/top every 2 s and shows rules with their decision rates and denial ratios, hot keys,
// the backend's health and latency, clock skew, and a form for /v1/inspect.
//
// Keys are callers' data, so the page only ever writes them with textContent. The response
// carries a Content-Security-Policy that allows the page's own script (by a nonce made per
// response) and style, fetches to its own origin, and nothing else.
#pragma once

#include <string>
#include <string_view>

#include "api/http_message.hpp"

namespace floodgate::service {

http_response render_ui();

// The page with `nonce` in its script and style tags (tests render it with a known nonce).
std::string ui_page(std::string_view nonce);

}  // namespace floodgate::service
