#include "admin.hpp"

#include "handler.hpp"

namespace floodgate::service {

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
  const bool known = path == "/metrics" || path == "/healthz" || path == "/readyz";
  if (!known) return error_response(404, "not found");
  if (req.method != "GET" && req.method != "HEAD") {
    auto res = error_response(405, "method not allowed; use GET, HEAD");
    res.headers.emplace_back("Allow", "GET, HEAD");
    return res;
  }
  if (path == "/metrics") return render_metrics(sources.stats->render());
  if (path == "/healthz") return render_health();
  const auto b = sources.backend ? sources.backend() : backend_state{};
  return render_ready(b.healthy, b.kind);
}

}  // namespace floodgate::service
